// hetbench compare JOB_A JOB_B [...]: each later job against the first, task
// pair by task pair, with the method of report/compare.h.
#include "report/compare.h"

#include "absl/strings/str_cat.h"
#include <map>

#include "client/commands/command.h"

namespace hetbench::client {

namespace {

class Compare final : public Command {
 public:
  CLI::App* Add(CLI::App& app, Common& common) override {
    CLI::App* sub = app.add_subcommand(
        "compare", "compare jobs run by run: per task pair and phase, median ratio, 95% CI, rank test, verdict");
    sub->add_option("ids", ids_, "JOB_A JOB_B [JOB_C ...]: each later job against the first")
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
    std::vector<v1::Job> jobs(ids_.size());
    for (size_t i = 0; i < ids_.size(); ++i) {
      grpc::Status s = FetchJob(c, ids_[i], &jobs[i]);
      if (!s.ok()) return RpcError(c.err, absl::StrCat("get job ", ids_[i]), s, c.common.server);
    }
    // A's tasks meet every later job: each task's samples are fetched once.
    std::map<std::string, std::vector<v1::SampleBatch>> fetched;
    auto samples_of = [&](const v1::Task& task, const std::vector<v1::SampleBatch>** out) -> grpc::Status {
      auto it = fetched.find(task.id());
      if (it == fetched.end()) {
        v1::TaskData data;
        if (grpc::Status s = FetchTaskData(c, task.id(), v1::GetTaskDataRequest::KIND_SAMPLES, &data); !s.ok()) {
          return s;
        }
        it = fetched.emplace(task.id(), std::vector<v1::SampleBatch>(data.samples().begin(), data.samples().end()))
                 .first;
      }
      *out = &it->second;
      return grpc::Status::OK;
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
  std::vector<std::string> ids_;
  std::string threshold_text_ = "2%";
  bool compare_anyway_ = false;
};

}  // namespace

std::unique_ptr<Command> CompareCommand() { return std::make_unique<Compare>(); }

}  // namespace hetbench::client
