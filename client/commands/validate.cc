// hetbench validate: the fleet-validation suite on every selected device,
// then the coordinator's verdicts (baseline.cc: the baselines they are judged against).
#include <algorithm>
#include <map>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "client/commands/command.h"
#include "common/job_spec.h"
#include "common/names.h"
#include "common/validate_spec.h"
#include "report/render/validation.h"

namespace hetbench::client {

namespace {

constexpr int kExitUnhealthy = 3;  // a device was DEGRADED or FAIL

int Unhealthy(const v1::Job& job, std::ostream& err) {
  for (const v1::DeviceVerdict& d : job.validation().devices()) {
    if (d.verdict() == v1::VERDICT_FAIL || d.verdict() == v1::VERDICT_DEGRADED) return kExitUnhealthy;
  }
  if (job.tasks().empty()) {
    err << "hetbench: no device was validated: no connected agent offers a selected device (the reasons are above)\n";
    return kExitFailed;
  }
  return job.state() == v1::JOB_STATE_SUCCEEDED ? kExitOk : kExitFailed;
}

class Validate final : public Command {
 public:
  CLI::App* Add(CLI::App& app, Common& common) override {
    sub_ = app.add_subcommand(
        "validate",
        "run the validation suite on every selected device and judge each against its SKU's baseline "
        "(exit 3 when a device is DEGRADED or FAIL)");
    sub_->add_option("--level", level_, "quick (each test boxed at 8 s) or standard (40 s)")->capture_default_str();
    sub_->add_option("--device-kind", kinds_,
                     "device kinds to validate (cpu, gpu, tpu, dpu, qpu-sim); default: every device")
        ->delimiter(',');
    sub_->add_option("--agents", agents_, "agent ids to validate; default: every connected agent")->delimiter(',');
    sub_->add_option("--label", labels_, "only agents with this label (key=value; repeatable)");
    sub_->add_option("--tests", tests_, "a subset of the suite, e.g. matmul,train_mlp (allreduce: the pairs between agents)")->delimiter(',');
    time_box_opt_ = sub_->add_option("--time-box", time_box_, "seconds each test may take (default by level)");
    repetitions_opt_ =
        sub_->add_option("--repetitions", repetitions_, "timed repetitions of each throughput test (default by level)");
    sub_->add_option("--baseline", baseline_file_,
                     "judge against a saved baseline: NAME[@VERSION] in the coordinator, or a JSON file");
    sub_->add_flag("--quarantine-degraded", quarantine_degraded_, "quarantine DEGRADED devices too (FAIL always is)");
    min_degraded_opt_ = sub_->add_option("--min-degraded-tests", min_degraded_tests_,
                     "DEGRADED tests that make a device DEGRADED (default 2)");
    sub_->add_option("--threads", threads_, "LibTorch threads (0 = the agent's setting)");
    sub_->add_flag("--no-wait", no_wait_, "print the job id and return");
    sub_->add_option("--wait-timeout", wait_timeout_, "seconds to wait for the verdicts")->capture_default_str();
    sub_->add_option("-o,--output", common.output, "table, json or csv")->capture_default_str();
    return sub_;
  }
  std::string View() const override { return "validate"; }
  std::vector<std::string> Formats() const override { return {"table", "json", "csv"}; }

  int Run(Context& c) override {
    v1::JobSpec spec;
    v1::ValidateSpec* v = spec.mutable_validate();
    v->set_level(level_);
    if (time_box_opt_->count() > 0) v->set_time_box_seconds(time_box_);  // 0 too: refused, naming the field
    if (repetitions_opt_->count() > 0) v->set_repetitions(repetitions_);
    v->set_quarantine_degraded(quarantine_degraded_);
    if (min_degraded_opt_->count() > 0) v->set_min_degraded_tests(min_degraded_tests_);
    for (const std::string& t : tests_) v->add_tests(t);
    if (!baseline_file_.empty()) {
      auto b = ResolveBaseline(c, baseline_file_);
      if (!b.ok()) {
        c.err << "hetbench: --baseline " << b.status().message() << "\n";
        return kExitUsage;
      }
      *v->mutable_baseline() = *std::move(b);
    }
    spec.set_threads(threads_);
    std::map<std::string, std::string> labels;
    for (const std::string& l : labels_) {
      std::vector<std::string> kv = absl::StrSplit(l, absl::MaxSplits('=', 1));
      if (kv.size() != 2 || kv[0].empty()) {
        c.err << "hetbench: --label " << QuotedInput(l) << ": give key=value\n";
        return kExitUsage;
      }
      labels[kv[0]] = kv[1];
    }
    std::vector<v1::DeviceKind> kinds;
    for (const std::string& k : kinds_) {
      auto kind = ParseDeviceKind(k);
      if (!kind) {
        c.err << "hetbench: --device-kind " << QuotedInput(k) << ": unknown; use cpu, gpu, tpu, dpu or qpu-sim\n";
        return kExitUsage;
      }
      kinds.push_back(*kind);
    }
    if (kinds.empty()) kinds.push_back(v1::DEVICE_KIND_UNSPECIFIED);
    std::vector<std::string> agents = agents_.empty() ? std::vector<std::string>{""} : agents_;
    for (const std::string& agent : agents) {
      for (v1::DeviceKind kind : kinds) {
        v1::TargetSelector* t = spec.add_targets();
        t->set_device_kind(kind);
        t->set_agent_id(agent);
        for (const auto& [k, val] : labels) (*t->mutable_labels())[k] = val;
      }
    }
    // The coordinator checks again; checking here names the flag's field before anything is sent.
    if (absl::Status s = ValidateJobSpec(WithDefaults(spec)); !s.ok()) {
      c.err << "hetbench: " << s.message() << "\n";
      return kExitUsage;
    }
    v1::SubmitJobRequest req;
    *req.mutable_spec() = spec;
    req.set_request_id(NewRequestId());
    v1::SubmitJobResponse resp;
    grpc::ClientContext ctx;
    Prepare(&ctx, c.common.timeout_seconds, c.common.token);
    const grpc::Status s = c.stub.SubmitJob(&ctx, req, &resp);
    if (!s.ok()) return RpcError(c.err, "validate refused", s, c.common.server);
    if (no_wait_) {
      c.out << resp.job_id() << "\n";
      return kExitOk;
    }
    c.err << "validating: " << resp.job_id() << "\n";
    auto ended = WatchUntilEnd(c, resp.job_id(), wait_timeout_, /*draw=*/false);
    if (!ended.ok()) {
      c.err << "hetbench: watching " << resp.job_id() << ": " << ended.status().message() << "\n";
      return kExitFailed;
    }
    v1::Job job;
    if (grpc::Status got = FetchJob(c, resp.job_id(), &job); !got.ok()) {
      return RpcError(c.err, "get job", got, c.common.server);
    }
    c.out << RenderValidation(job, c.format);
    return Unhealthy(job, c.err);
  }

 private:
  CLI::App* sub_ = nullptr;
  CLI::Option* time_box_opt_ = nullptr;
  CLI::Option* repetitions_opt_ = nullptr;
  CLI::Option* min_degraded_opt_ = nullptr;
  std::string level_ = "quick";
  std::vector<std::string> kinds_, agents_, labels_, tests_;
  double time_box_ = 0;
  int repetitions_ = 0, min_degraded_tests_ = 0;
  std::string baseline_file_;
  bool quarantine_degraded_ = false, no_wait_ = false;
  int threads_ = 0;
  double wait_timeout_ = 3600;
};

}  // namespace

std::unique_ptr<Command> ValidateCommand() { return std::make_unique<Validate>(); }

}  // namespace hetbench::client
