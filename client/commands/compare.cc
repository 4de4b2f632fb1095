// hetbench compare JOB_A JOB_B [...]: each later side against the first,
// configuration by configuration, with the method of report/compare.h.
#include "report/compare.h"

#include <algorithm>
#include <map>
#include <set>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "client/commands/command.h"
#include "common/names.h"
#include "report/render/common.h"

namespace hetbench::client {

namespace {

class Compare final : public Command {
 public:
  CLI::App* Add(CLI::App& app, Common& common) override {
    CLI::App* sub = app.add_subcommand(
        "compare", "compare jobs run by run: per task pair and phase, median ratio, 95% CI, rank test, verdict");
    sub->add_option("ids", ids_,
                    "JOB_A JOB_B [JOB_C ...]: each later side against the first; a side may be runs of one spec, "
                    "JOB,JOB,...; with 2 or more runs a side (these, or a job's --repeats) runs are compared as runs, "
                    "so the noise between runs counts; runs that took turns on one device (jobs submitted A B A B) "
                    "are compared couple by couple where the machine's runs next to each other share its drift")
        ->required()
        ->expected(2, 64);
    sub->add_option("--threshold", threshold_text_, "smallest change called slower or faster, e.g. 2% or 0.02")
        ->capture_default_str();
    sub->add_flag("--compare-anyway", compare_anyway_,
                  "compare tasks whose model fingerprints differ, and give verdicts on INVALID phases and where the "
                  "machine probe differed (marked)");
    sub->add_option("--spread-jobs", spread_jobs_,
                    "the newest N succeeded jobs of each compared model to learn the machine's run-to-run spread "
                    "from (runs as the unit, one agent and device; 8 with 2 runs or more are needed), and how much two "
                    "runs next to each other differ there (for runs that took turns); 0: the runs' own spread only")
        ->check(CLI::Range(0, 1000))
        ->capture_default_str();
    sub->add_option("-o,--output", common.output, "table, json or csv")->capture_default_str();
    return sub;
  }
  std::string View() const override { return "compare"; }
  std::vector<std::string> Formats() const override { return {"table", "json", "csv"}; }

  int Run(Context& c) override {
    auto parsed = ParseThreshold(threshold_text_);
    if (!parsed.ok()) {
      c.err << "hetbench: --threshold " << parsed.status().message() << "\n";
      return kExitUsage;
    }
    const double threshold = *parsed;
    // Each side: one job, or runs of one spec as JOB,JOB,...; a job with
    // `repeats` brings its own runs.
    std::vector<std::vector<v1::Job>> sides;
    for (const std::string& id : ids_) {
      std::vector<v1::Job>& side = sides.emplace_back();
      for (const std::string& run : std::vector<std::string>(absl::StrSplit(id, ',', absl::SkipEmpty()))) {
        v1::Job& job = side.emplace_back();
        if (grpc::Status s = FetchJob(c, run, &job); !s.ok()) {
          return RpcError(c.err, absl::StrCat("get job ", run), s, c.common.server);
        }
      }
      if (side.empty()) {
        c.err << "hetbench: compare " << QuotedInput(id) << ": names no job; give JOB or JOB,JOB,...\n";
        return kExitUsage;
      }
    }
    auto pointers = [](const std::vector<v1::Job>& side) {
      std::vector<const v1::Job*> out;
      for (const v1::Job& job : side) out.push_back(&job);
      return out;
    };
    std::vector<v1::Job> other_jobs;
    if (grpc::Status s = FetchOthers(c, sides, &other_jobs); !s.ok()) {
      return RpcError(c.err, "list jobs", s, c.common.server);
    }
    const std::vector<const v1::Job*> others = pointers(other_jobs);
    bool compared_any = false;
    for (size_t j = 1; j < sides.size(); ++j) {
      std::vector<std::string> unpaired;
      std::vector<PairResult> results;
      for (const RunPair& pair : PairRuns(pointers(sides[0]), pointers(sides[j]), compare_anyway_, &unpaired)) {
        if (!pair.refused.empty()) {
          results.push_back({pair, v1::PHASE_UNSPECIFIED, {}});
          continue;
        }
        for (v1::Phase phase : kComparedPhases) {
          std::vector<std::vector<double>> steps_a, steps_b;
          bool any = false;
          for (auto [tasks, steps] : {std::pair{&pair.a, &steps_a}, std::pair{&pair.b, &steps_b}}) {
            for (const v1::Task* t : *tasks) {
              const std::vector<v1::SampleBatch>* samples = nullptr;
              if (grpc::Status s = SamplesOf(c, *t, &samples); !s.ok()) {
                return RpcError(c.err, absl::StrCat("samples of ", t->id()), s, c.common.server);
              }
              steps->push_back(TimesPerSample(*samples, phase));
              any = any || !steps->back().empty();
            }
          }
          if (!any) continue;
          results.push_back(
              {pair, phase, CompareRunPhase(pair, phase, steps_a, steps_b, threshold, compare_anyway_, others)});
          compared_any = true;
        }
      }
      c.out << RenderComparison(ids_[0], ids_[j], results, unpaired, threshold, c.common.output);
    }
    if (!compared_any) {
      c.err << "hetbench: compare: no pair of tasks could be compared (see above)\n";
      return kExitFailed;
    }
    return kExitOk;
  }

 private:
  // The newest --spread-jobs jobs of each model the sides ran (their stored
  // summaries, not their samples), when some side has 2 runs or more.
  grpc::Status FetchOthers(Context& c, const std::vector<std::vector<v1::Job>>& sides, std::vector<v1::Job>* out) {
    std::set<std::string> models;
    bool runs = false;
    for (const std::vector<v1::Job>& side : sides) {
      runs = runs || side.size() > 1;
      for (const v1::Job& job : side) {
        runs = runs || job.spec().repeats() > 1;
        for (const v1::Task& t : job.tasks()) models.insert(render::TaskModel(job, t));
      }
    }
    if (spread_jobs_ == 0 || !runs) return grpc::Status::OK;
    std::set<std::string> seen;
    for (const std::string& model : models) {
      v1::ListJobsRequest req;
      req.set_model(model);
      req.set_state(v1::JOB_STATE_SUCCEEDED);
      req.set_page_size(spread_jobs_);
      grpc::ClientContext ctx;
      Prepare(&ctx, c.common.timeout_seconds, c.common.token);
      v1::ListJobsResponse resp;
      if (grpc::Status s = c.stub.ListJobs(&ctx, req, &resp); !s.ok()) return s;
      for (const v1::Job& listed : resp.jobs()) {
        if (!seen.insert(listed.id()).second) continue;
        if (grpc::Status s = FetchJob(c, listed.id(), &out->emplace_back()); !s.ok()) return s;
      }
    }
    return grpc::Status::OK;
  }

  // A task's stored samples, fetched once (side A's meet every later side).
  grpc::Status SamplesOf(Context& c, const v1::Task& task, const std::vector<v1::SampleBatch>** out) {
    auto it = fetched_.find(task.id());
    if (it == fetched_.end()) {
      v1::TaskData data;
      if (grpc::Status s = FetchTaskData(c, task.id(), v1::GetTaskDataRequest::KIND_SAMPLES, &data); !s.ok()) return s;
      it =
          fetched_.emplace(task.id(), std::vector<v1::SampleBatch>(data.samples().begin(), data.samples().end())).first;
    }
    *out = &it->second;
    return grpc::Status::OK;
  }

  std::map<std::string, std::vector<v1::SampleBatch>> fetched_;
  std::vector<std::string> ids_;
  std::string threshold_text_ = "2%";
  bool compare_anyway_ = false;
  int spread_jobs_ = 100;
};

}  // namespace

std::unique_ptr<Command> CompareCommand() { return std::make_unique<Compare>(); }

}  // namespace hetbench::client
