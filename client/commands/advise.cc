// hetbench advise JOB: the placement advisor (report/advise.h) on a job that
// timed layers on several device kinds; --verify submits the advised split
// and prints predicted against measured.
#include "report/advise.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "client/commands/command.h"
#include "report/render/common.h"
#include "common/job_spec.h"
#include "common/names.h"

namespace hetbench::client {

namespace {

class AdviseCmd final : public Command {
 public:
  CLI::App* Add(CLI::App& app, Common& common) override {
    CLI::App* sub = app.add_subcommand(
        "advise", "place contiguous layer ranges on device kinds from a job's per-layer timings (time, energy or cost)");
    sub->add_option("job", job_id_, "a job whose tasks ran the model with --layers on several device kinds")
        ->required();
    sub->add_option("--objective", objective_, "time, energy or cost")->capture_default_str();
    sub->add_option("--max-stages", options_.max_stages, "largest number of stages a plan may have")
        ->capture_default_str()
        ->check(CLI::Range(1, 8));
    sub->add_option("--link-gbytes-per-second", options_.link_gbytes_per_second,
                    "bandwidth between two device kinds (default: measured by the job's split tasks)");
    sub->add_option("--model", options_.model, "the model to plan (default: the one timed on the most kinds)");
    sub->add_option("--batch-size", options_.batch_size, "the batch size to plan (default: as for --model)");
    sub->add_option("--plan", options_.plan, "predict this plan instead of searching: LAYERS:KIND per stage, e.g. "
                                             "0-2:cpu,3-:cpu")
        ->delimiter(',');
    sub->add_flag("--across-agents", options_.across_agents,
                  "the stages on different agents (split across agents): --plan may put neighbours on one kind, "
                  "--verify runs it so");
    sub->add_option("--link-from", link_job_id_,
                    "a job whose split tasks measured the link (default: the advised job's own split tasks)");
    sub->add_flag("--verify", verify_, "submit the advised split, wait, and print predicted against measured");
    sub->add_option("--verify-steps", verify_steps_, "measured training steps of the --verify run")
        ->capture_default_str()
        ->check(CLI::Range(10, 1000000));
    sub->add_option("-o,--output", common.output, "table or json")->capture_default_str();
    return sub;
  }
  std::string View() const override { return "advise"; }
  std::vector<std::string> Formats() const override { return {"table", "json"}; }

  int Run(Context& c) override {
    auto objective = ParseObjective(objective_);
    if (!objective.ok()) {
      c.err << "hetbench: " << objective.status().message() << "\n";
      return kExitUsage;
    }
    options_.objective = *objective;
    v1::Job job, link_job;
    if (grpc::Status s = FetchJob(c, job_id_, &job); !s.ok()) return RpcError(c.err, "get job", s, c.common.server);
    if (!link_job_id_.empty()) {
      if (grpc::Status s = FetchJob(c, link_job_id_, &link_job); !s.ok()) {
        return RpcError(c.err, "get job (--link-from)", s, c.common.server);
      }
      options_.link_job = &link_job;
    }
    auto advice = Advise(job, options_);
    if (!advice.ok()) {
      c.err << "hetbench: advise " << job_id_ << ": " << advice.status().message() << "\n";
      return kExitFailed;
    }
    if (!verify_) {
      c.out << RenderAdvice(*advice, c.format);
      return kExitOk;
    }
    c.err << RenderAdvice(*advice, OutputFormat::kTable);
    return Verify(c, job, *advice);
  }

 private:
  // Runs the advised plan as a split task on the same seed and compares its
  // measured training step with the prediction.
  int Verify(Context& c, const v1::Job& job, const Advice& advice) {
    v1::SubmitJobRequest req;
    v1::JobSpec spec;
    spec.add_models(advice.model);
    spec.add_batch_sizes(advice.batch_size);
    spec.set_seed(job.spec().seed());
    spec.set_threads(job.spec().threads());
    spec.set_name(absl::StrCat("advise-verify ", job.id()));
    spec.mutable_train()->set_warmup_steps(10);
    spec.mutable_train()->set_min_steps(verify_steps_);
    spec.mutable_train()->set_min_duration_seconds(0);
    spec.mutable_inference()->set_max_batches(1);
    *spec.mutable_qpu() = job.spec().qpu();
    const size_t layers = advice.layer_names.size();
    const std::vector<Stage>& stages = advice.best.stages;
    for (const Stage& stage : stages) {
      v1::SplitStage* st = spec.mutable_split()->add_stages();
      st->set_layers(StageLayers(stage, layers));
      st->mutable_target()->set_device_kind(stage.kind);
    }
    spec.add_targets()->set_device_kind(stages[0].kind);
    spec.mutable_split()->set_across_agents(advice.across_agents);
    if (stages.size() == 1) spec.clear_split();  // one device: a plain task
    *req.mutable_spec() = WithDefaults(spec);
    req.set_request_id(NewRequestId());
    v1::SubmitJobResponse resp;
    grpc::ClientContext ctx;
    Prepare(&ctx, c.common.timeout_seconds, c.common.token);
    if (grpc::Status s = c.stub.SubmitJob(&ctx, req, &resp); !s.ok()) {
      return RpcError(c.err, "submit the advised split", s, c.common.server);
    }
    c.err << "verifying with " << resp.job_id() << " (--split " << SplitFlag(advice.best, layers)
          << (advice.across_agents ? " --split-across-agents" : "") << ")\n";
    auto ended = WatchUntilEnd(c, resp.job_id(), 3600, /*draw=*/false);
    if (!ended.ok()) {
      c.err << "hetbench: watching " << resp.job_id() << ": " << ended.status().message() << "\n";
      return kExitFailed;
    }
    v1::Job run;
    if (grpc::Status s = FetchJob(c, resp.job_id(), &run); !s.ok()) return RpcError(c.err, "get job", s, c.common.server);
    const v1::PhaseResult* train = run.tasks_size() > 0 ? render::FindPhase(run.tasks(0), v1::PHASE_TRAIN) : nullptr;
    if (run.state() != v1::JOB_STATE_SUCCEEDED || train == nullptr) {
      c.err << "hetbench: the verification job " << resp.job_id() << " ended " << JobStateName(run.state()) << ": "
            << run.error() << "\n";
      return kExitFailed;
    }
    const double measured = train->stats().p50_ns(), predicted = advice.best.step_ns;
    const double error = (predicted - measured) / measured;
    c.out << absl::StrFormat("%s %s%s: predicted step %.3f ms, measured %.3f ms (%s, p50 of %d steps): %+.1f%%\n",
                             advice.plan_given ? "plan" : "advised", SplitFlag(advice.best, layers),
                             advice.across_agents ? " across agents" : "", predicted / 1e6, measured / 1e6, resp.job_id(),
                             train->stats().count(), error * 100);
    if (advice.interval_high_ns > 0) {
      const bool within = measured >= advice.interval_low_ns && measured <= advice.interval_high_ns;
      c.out << absl::StrFormat(
          "measured %s the 95%% prediction interval %.3f-%.3f ms (from %d runs' profiles%s)\n",
          within ? "within" : "OUTSIDE", advice.interval_low_ns / 1e6, advice.interval_high_ns / 1e6, advice.runs,
          advice.interval_has_link ? absl::StrCat(" and ", advice.link_runs.size(), " runs' links") : std::string());
    } else {
      c.out << "no prediction interval: the profiling job had one run of each kind (submit it with --repeats 3)\n";
    }
    return kExitOk;
  }

  std::string job_id_, link_job_id_, objective_ = "time";
  AdviseOptions options_;
  bool verify_ = false;
  int64_t verify_steps_ = 200;
};

}  // namespace

std::unique_ptr<Command> AdviseCommand() { return std::make_unique<AdviseCmd>(); }

}  // namespace hetbench::client
