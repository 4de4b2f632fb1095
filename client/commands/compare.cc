// hetbench compare JOB_A JOB_B [...]: each later job against the first, task
// pair by task pair, with the method of report/compare.h.
#include "report/compare.h"

#include <algorithm>
#include <map>
#include <tuple>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "client/commands/command.h"
#include "common/names.h"

namespace hetbench::client {

namespace {

class Compare final : public Command {
 public:
  CLI::App* Add(CLI::App& app, Common& common) override {
    CLI::App* sub = app.add_subcommand(
        "compare", "compare jobs run by run: per task pair and phase, median ratio, 95% CI, rank test, verdict");
    sub->add_option("ids", ids_,
                    "JOB_A JOB_B [JOB_C ...]: each later job against the first; a side may be runs of one spec, "
                    "JOB,JOB,... (2 or more each side): compared run by run, so the noise between runs counts")
        ->required()
        ->expected(2, 64);
    sub->add_option("--threshold", threshold_text_, "smallest change called slower or faster, e.g. 2% or 0.02")
        ->capture_default_str();
    sub->add_flag("--compare-anyway", compare_anyway_,
                  "compare tasks whose model fingerprints differ, and give verdicts on INVALID phases (marked)");
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
    if (std::any_of(ids_.begin(), ids_.end(),
                    [](const std::string& id) { return id.find(',') != std::string::npos; })) {
      return CompareRunGroups(c, threshold);
    }
    std::vector<v1::Job> jobs(ids_.size());
    for (size_t i = 0; i < ids_.size(); ++i) {
      grpc::Status s = FetchJob(c, ids_[i], &jobs[i]);
      if (!s.ok()) return RpcError(c.err, absl::StrCat("get job ", ids_[i]), s, c.common.server);
    }
    // A's tasks meet every later job: each task's samples are fetched once.
    auto samples_of = [&](const v1::Task& task, const std::vector<v1::SampleBatch>** out) {
      return SamplesOf(c, task, out);
    };
    bool compared_any = false;
    for (size_t j = 1; j < jobs.size(); ++j) {
      std::vector<std::string> unpaired;
      std::vector<PairResult> results;
      for (const TaskPair& pair : PairTasks(jobs[0], jobs[j], compare_anyway_, &unpaired)) {
        if (!pair.refused.empty()) {
          results.push_back({pair, v1::PHASE_UNSPECIFIED, {}});
          continue;
        }
        const std::vector<v1::SampleBatch>*sa = nullptr, *sb = nullptr;
        for (auto [task, out] : {std::pair{pair.a, &sa}, std::pair{pair.b, &sb}}) {
          grpc::Status s = samples_of(*task, out);
          if (!s.ok()) return RpcError(c.err, absl::StrCat("samples of ", task->id()), s, c.common.server);
        }
        for (v1::Phase phase : kComparedPhases) {
          const std::vector<double> a = TimesPerSample(*sa, phase), b = TimesPerSample(*sb, phase);
          if (a.empty() && b.empty()) continue;
          results.push_back({pair, phase, ComparePhase(*pair.a, *pair.b, phase, a, b, threshold, compare_anyway_)});
          compared_any = true;
        }
      }
      c.out << RenderComparison(jobs[0], jobs[j], results, unpaired, threshold, c.common.output);
    }
    if (!compared_any) {
      c.err << "hetbench: compare: no pair of tasks could be compared (see above)\n";
      return kExitFailed;
    }
    return kExitOk;
  }

 private:
  // A task's stored samples, fetched once.
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

  // Sides of 2 or more runs each (JOB,JOB,...): each later side against the
  // first, task pair by task pair (the first run of each side pairs; the
  // other runs give the same key's task), phase by phase with CompareRuns.
  int CompareRunGroups(Context& c, double threshold) {
    std::vector<std::vector<v1::Job>> sides;
    for (const std::string& id : ids_) {
      std::vector<v1::Job>& side = sides.emplace_back();
      for (const std::string& run : std::vector<std::string>(absl::StrSplit(id, ',', absl::SkipEmpty()))) {
        v1::Job& job = side.emplace_back();
        if (grpc::Status s = FetchJob(c, run, &job); !s.ok())
          return RpcError(c.err, absl::StrCat("get job ", run), s, c.common.server);
      }
      if (side.size() < 2) {
        c.err << "hetbench: compare " << QuotedInput(id)
              << ": a side of runs needs 2 or more jobs (JOB,JOB,...); give every side as runs, or every side as one "
                 "job\n";
        return kExitUsage;
      }
    }
    // The task of each run of `side` paired with `first` (a task of side[0]), by PairTasks' key.
    auto runs_of = [&](const std::vector<v1::Job>& side, const v1::Task& first) {
      std::vector<const v1::Task*> out = {&first};
      for (size_t k = 1; k < side.size(); ++k) {
        std::vector<std::string> ignored;
        for (const TaskPair& p : PairTasks(side[0], side[k], compare_anyway_, &ignored)) {
          if (p.a == &first && p.refused.empty()) out.push_back(p.b);
        }
      }
      return out;
    };
    bool compared_any = false;
    for (size_t j = 1; j < sides.size(); ++j) {
      std::vector<std::string> unpaired;
      std::vector<PairResult> results;
      for (const TaskPair& pair : PairTasks(sides[0][0], sides[j][0], compare_anyway_, &unpaired)) {
        if (!pair.refused.empty()) {
          results.push_back({pair, v1::PHASE_UNSPECIFIED, {}});
          continue;
        }
        const std::vector<const v1::Task*> ta = runs_of(sides[0], *pair.a), tb = runs_of(sides[j], *pair.b);
        for (v1::Phase phase : kComparedPhases) {
          std::vector<std::vector<double>> ra, rb;
          std::vector<std::string> invalid;
          for (auto [tasks, runs, side] : {std::tuple{&ta, &ra, "A"}, std::tuple{&tb, &rb, "B"}}) {
            for (const v1::Task* t : *tasks) {
              const std::vector<v1::SampleBatch>* samples = nullptr;
              if (grpc::Status s = SamplesOf(c, *t, &samples); !s.ok()) {
                return RpcError(c.err, absl::StrCat("samples of ", t->id()), s, c.common.server);
              }
              runs->push_back(TimesPerSample(*samples, phase));
              if (std::string why = InvalidSide(*t, phase, side); !why.empty()) invalid.push_back(why);
            }
          }
          if (std::all_of(ra.begin(), ra.end(), [](const auto& r) { return r.empty(); }) &&
              std::all_of(rb.begin(), rb.end(), [](const auto& r) { return r.empty(); })) {
            continue;
          }
          StepComparison cmp = CompareRuns(ra, rb, threshold);
          cmp.invalid = absl::StrJoin(invalid, ", ");
          if (!cmp.invalid.empty() && cmp.verdict != "too few runs") {
            cmp.verdict = compare_anyway_ ? absl::StrCat(cmp.verdict, " (", cmp.invalid, ")")
                                          : absl::StrCat("not comparable: ", cmp.invalid);
          }
          results.push_back({pair, phase, cmp});
          compared_any = true;
        }
      }
      c.out << RenderComparison(sides[0][0], sides[j][0], results, unpaired, threshold, c.common.output,
                                static_cast<int>(std::min(sides[0].size(), sides[j].size())), ids_[0], ids_[j]);
    }
    if (!compared_any) {
      c.err << "hetbench: compare: no pair of tasks could be compared (see above)\n";
      return kExitFailed;
    }
    return kExitOk;
  }

  std::map<std::string, std::vector<v1::SampleBatch>> fetched_;
  std::vector<std::string> ids_;
  std::string threshold_text_ = "2%";
  bool compare_anyway_ = false;
};

}  // namespace

std::unique_ptr<Command> CompareCommand() { return std::make_unique<Compare>(); }

}  // namespace hetbench::client
