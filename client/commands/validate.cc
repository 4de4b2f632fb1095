// hetbench validate: the fleet-validation suite on every selected device,
// then the coordinator's verdicts; hetbench baseline save|show|diff: the
// baselines validations are judged against, as JSON files.
#include <google/protobuf/util/json_util.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <map>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "client/commands/command.h"
#include "common/job_spec.h"
#include "common/names.h"
#include "common/stats.h"
#include "common/validate_spec.h"
#include "report/render/validation.h"

namespace hetbench::client {

namespace {

constexpr int kExitUnhealthy = 3;  // a device was DEGRADED or FAIL

// A baseline file: JSON as `baseline save` writes it, checked field by field.
absl::StatusOr<v1::Baseline> ReadBaseline(const std::string& path) {
  std::ifstream in(path);
  if (!in) return absl::NotFoundError(absl::StrCat(path, ": cannot be read"));
  std::stringstream text;
  text << in.rdbuf();
  if (text.str().size() > (64 << 20)) return absl::InvalidArgumentError(absl::StrCat(path, ": over 64 MiB"));
  v1::Baseline b;
  const auto parsed = google::protobuf::util::JsonStringToMessage(text.str(), &b);
  if (!parsed.ok()) {
    return absl::InvalidArgumentError(absl::StrCat(path, ": not a baseline (JSON as `hetbench baseline save` writes): ",
                                                   std::string(parsed.message()).substr(0, 200)));
  }
  std::vector<std::string> problems;
  CheckBaseline(b, path, &problems);
  if (!problems.empty()) return absl::InvalidArgumentError(absl::StrJoin(problems, "; "));
  return b;
}

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
    sub_->add_option("--level", level_, "quick (each test boxed at 8 s) or standard (45 s)")->capture_default_str();
    sub_->add_option("--device-kind", kinds_,
                     "device kinds to validate (cpu, gpu, tpu, dpu, qpu-sim); default: every device")
        ->delimiter(',');
    sub_->add_option("--agents", agents_, "agent ids to validate; default: every connected agent")->delimiter(',');
    sub_->add_option("--label", labels_, "only agents with this label (key=value; repeatable)");
    sub_->add_option("--tests", tests_, "a subset of the suite, e.g. matmul,train_mlp")->delimiter(',');
    time_box_opt_ = sub_->add_option("--time-box", time_box_, "seconds each test may take (default by level)");
    repetitions_opt_ =
        sub_->add_option("--repetitions", repetitions_, "timed repetitions of each throughput test (default by level)");
    sub_->add_option("--baseline", baseline_file_, "judge against this saved baseline (hetbench baseline save)");
    sub_->add_flag("--quarantine-degraded", quarantine_degraded_, "quarantine DEGRADED devices too (FAIL always is)");
    min_degraded_opt_ = sub_->add_option("--min-degraded-tests", min_degraded_tests_,
                     "tests below their thresholds that make a device DEGRADED (default 2)");
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
      auto b = ReadBaseline(baseline_file_);
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

// Per SKU and test, the baselines of several validation jobs as one: the
// median of their medians, and a spread that covers both what each job saw
// and how far the jobs' medians lie apart (run-to-run noise, which one
// job's repetitions cannot show).
std::vector<v1::SkuBaseline> MergeRuns(const std::vector<v1::Job>& jobs) {
  std::map<std::string, v1::SkuBaseline> skus;
  std::map<std::pair<std::string, std::string>, std::vector<const v1::MetricBaseline*>> metrics;
  for (const v1::Job& job : jobs) {
    for (const v1::SkuBaseline& s : job.validation().baselines()) {
      v1::SkuBaseline& out = skus[s.sku()];
      out.set_sku(s.sku());
      out.set_devices(std::max(out.devices(), s.devices()));
      out.set_simulated(out.simulated() || s.simulated());
      if (out.loss_bits_size() == 0) *out.mutable_loss_bits() = s.loss_bits();
      for (const v1::MetricBaseline& m : s.metrics()) metrics[{s.sku(), m.test()}].push_back(&m);
    }
  }
  auto median = [](std::vector<double> v) { return MedianInPlace(v); };
  for (const auto& [key, list] : metrics) {
    std::vector<double> medians, spreads;
    int devices = 0;
    for (const v1::MetricBaseline* m : list) {
      medians.push_back(m->median());
      spreads.push_back(m->spread());
      devices = std::max(devices, m->devices());
    }
    const double mid = median(medians);
    std::vector<double> dev;
    for (double x : medians) dev.push_back(std::fabs(x - mid));
    v1::MetricBaseline* out = skus[key.first].add_metrics();
    *out = *list.front();
    out->set_median(mid);
    out->set_spread(std::max(median(spreads), medians.size() >= 2 ? 1.4826 * median(dev) : 0.0));
    out->set_devices(devices);
    out->set_runs(static_cast<int>(list.size()));
  }
  std::vector<v1::SkuBaseline> out;
  for (auto& [sku, b] : skus) out.push_back(std::move(b));
  return out;
}

class BaselineSave final : public Command {
 public:
  CLI::App* Add(CLI::App& app, Common& common) override {
    (void)common;
    sub_ = Group(app, "baseline", "baselines that validations are judged against (JSON files)")
               ->add_subcommand("save", "write the per-SKU baselines validation jobs measured as JSON");
    sub_->add_option("jobs", job_ids_,
                     "validation job ids, comma-separated: several runs give a spread that covers run-to-run noise")
        ->required()
        ->delimiter(',');
    sub_->add_option("--name", name_, "the baseline's name, e.g. nightly");
    sub_->add_option("--version", version_, "its version number (1, 2, ...)")->capture_default_str();
    sub_->add_option("--out", path_, "file to write (default: standard output)");
    return sub_;
  }
  std::string View() const override { return "baseline save"; }
  std::vector<std::string> Formats() const override { return {"table"}; }
  int Run(Context& c) override {
    std::vector<v1::Job> jobs;
    double finished = 0;
    for (const std::string& id : job_ids_) {
      v1::Job job;
      if (grpc::Status s = FetchJob(c, id, &job); !s.ok()) return RpcError(c.err, "get job", s, c.common.server);
      if (!IsValidate(job.spec())) {
        c.err << "hetbench: " << QuotedInput(id) << " is not a validation job; run hetbench validate first\n";
        return kExitFailed;
      }
      if (!IsTerminal(job.state()) || job.validation().baselines().empty()) {
        c.err << "hetbench: " << id << " has no measured baseline yet (" << JobStateName(job.state())
              << "); wait for it to end\n";
        return kExitFailed;
      }
      finished = std::max(finished, job.finished_unix_seconds());
      jobs.push_back(std::move(job));
    }
    v1::Baseline b;
    b.set_schema(kBaselineSchema);
    b.set_name(name_);
    b.set_version(version_);
    b.set_source_job_id(absl::StrJoin(job_ids_, ","));
    b.set_created_unix_seconds(finished);
    for (v1::SkuBaseline& s : MergeRuns(jobs)) *b.add_skus() = std::move(s);
    std::string json;
    google::protobuf::util::JsonPrintOptions options;
    options.add_whitespace = true;
    (void)google::protobuf::util::MessageToJsonString(b, &json, options);
    if (path_.empty()) {
      c.out << json;
      return kExitOk;
    }
    std::ofstream out(path_);
    out << json;
    if (!out) {
      c.err << "hetbench: " << path_ << ": cannot be written\n";
      return kExitFailed;
    }
    c.err << "wrote " << path_ << ": " << b.skus_size() << " SKUs from " << b.source_job_id() << "\n";
    return kExitOk;
  }

 private:
  CLI::App* sub_ = nullptr;
  std::vector<std::string> job_ids_;
  std::string name_, path_;
  int version_ = 1;
};

class BaselineShow final : public Command {
 public:
  CLI::App* Add(CLI::App& app, Common& common) override {
    (void)common;
    sub_ = Group(app, "baseline", "baselines that validations are judged against (JSON files)")
               ->add_subcommand("show", "print a baseline file's SKUs and figures");
    sub_->add_option("file", path_, "a baseline file")->required();
    return sub_;
  }
  std::string View() const override { return "baseline show"; }
  std::vector<std::string> Formats() const override { return {"table"}; }
  int Run(Context& c) override {
    auto b = ReadBaseline(path_);
    if (!b.ok()) {
      c.err << "hetbench: " << b.status().message() << "\n";
      return kExitFailed;
    }
    c.out << RenderBaseline(*b);
    return kExitOk;
  }

 private:
  CLI::App* sub_ = nullptr;
  std::string path_;
};

class BaselineDiff final : public Command {
 public:
  CLI::App* Add(CLI::App& app, Common& common) override {
    (void)common;
    sub_ = Group(app, "baseline", "baselines that validations are judged against (JSON files)")
               ->add_subcommand("diff", "two baseline files side by side (B / A per SKU and test)");
    sub_->add_option("a", a_, "the older baseline file")->required();
    sub_->add_option("b", b_, "the newer baseline file")->required();
    return sub_;
  }
  std::string View() const override { return "baseline diff"; }
  std::vector<std::string> Formats() const override { return {"table"}; }
  int Run(Context& c) override {
    auto a = ReadBaseline(a_);
    auto b = ReadBaseline(b_);
    for (const auto* r : {&a, &b}) {
      if (!r->ok()) {
        c.err << "hetbench: " << r->status().message() << "\n";
        return kExitFailed;
      }
    }
    c.out << RenderBaselineDiff(*a, *b);
    return kExitOk;
  }

 private:
  CLI::App* sub_ = nullptr;
  std::string a_, b_;
};

}  // namespace

std::vector<std::unique_ptr<Command>> ValidateCommands() {
  std::vector<std::unique_ptr<Command>> out;
  out.push_back(std::make_unique<Validate>());
  out.push_back(std::make_unique<BaselineSave>());
  out.push_back(std::make_unique<BaselineShow>());
  out.push_back(std::make_unique<BaselineDiff>());
  return out;
}

}  // namespace hetbench::client
