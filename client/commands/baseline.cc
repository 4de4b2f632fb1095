// hetbench baseline save|show|diff|list: the per-SKU baselines validations
// are judged against, versioned in the coordinator (or JSON files).
#include <google/protobuf/util/json_util.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "client/commands/command.h"
#include "common/names.h"
#include "common/stats.h"
#include "common/validate_spec.h"
#include "report/render/common.h"
#include "report/render/validation.h"

namespace hetbench::client {

namespace {

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
    sub_ = Group(app, "baseline", "baselines that validations are judged against, versioned in the coordinator")
               ->add_subcommand("save",
                                "keep the per-SKU baselines validation jobs measured: in the coordinator as the "
                                "next version of --name, or as a JSON file with --out");
    sub_->add_option("jobs", job_ids_,
                     "validation job ids, comma-separated: several runs give a spread that covers run-to-run noise")
        ->required()
        ->delimiter(',');
    sub_->add_option("--name", name_, "the baseline's name, e.g. nightly (required unless --out)");
    sub_->add_option("--out", path_, "write a JSON file instead of storing it in the coordinator");
    sub_->add_option("--version", version_, "with --out: the file's version number")->capture_default_str();
    return sub_;
  }
  std::string View() const override { return "baseline save"; }
  std::vector<std::string> Formats() const override { return {"table"}; }
  int Run(Context& c) override {
    if (path_.empty() && name_.empty()) {
      c.err << "hetbench: baseline save: give --name NAME (stored in the coordinator) or --out FILE\n";
      return kExitUsage;
    }
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
    b.set_source_job_id(absl::StrJoin(job_ids_, ","));
    for (v1::SkuBaseline& s : MergeRuns(jobs)) *b.add_skus() = std::move(s);
    if (path_.empty()) {
      v1::SaveBaselineRequest req;
      *req.mutable_baseline() = b;
      v1::Baseline saved;
      grpc::ClientContext ctx;
      Prepare(&ctx, c.common.timeout_seconds, c.common.token);
      if (grpc::Status s = c.stub.SaveBaseline(&ctx, req, &saved); !s.ok()) {
        return RpcError(c.err, "save baseline", s, c.common.server);
      }
      c.out << "saved baseline " << saved.name() << " v" << saved.version() << ": " << b.skus_size() << " SKUs from "
            << saved.source_job_id() << "\n";
      return kExitOk;
    }
    b.set_version(version_);
    b.set_created_unix_seconds(finished);
    std::string json;
    google::protobuf::util::JsonPrintOptions options;
    options.add_whitespace = true;
    (void)google::protobuf::util::MessageToJsonString(b, &json, options);
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
    sub_ = Group(app, "baseline", "baselines that validations are judged against, versioned in the coordinator")
               ->add_subcommand("show", "print a baseline's SKUs and figures");
    sub_->add_option("baseline", path_, "NAME[@VERSION] in the coordinator (the latest without @), or a JSON file")
        ->required();
    return sub_;
  }
  std::string View() const override { return "baseline show"; }
  std::vector<std::string> Formats() const override { return {"table"}; }
  int Run(Context& c) override {
    auto b = ResolveBaseline(c, path_);
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
    sub_ = Group(app, "baseline", "baselines that validations are judged against, versioned in the coordinator")
               ->add_subcommand("diff", "two baselines side by side (B / A per SKU and test)");
    sub_->add_option("a", a_, "the older: NAME[@VERSION] or a JSON file")->required();
    sub_->add_option("b", b_, "the newer: NAME[@VERSION] or a JSON file")->required();
    return sub_;
  }
  std::string View() const override { return "baseline diff"; }
  std::vector<std::string> Formats() const override { return {"table"}; }
  int Run(Context& c) override {
    auto a = ResolveBaseline(c, a_);
    auto b = ResolveBaseline(c, b_);
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

class BaselineList final : public Command {
 public:
  CLI::App* Add(CLI::App& app, Common& common) override {
    sub_ = Group(app, "baseline", "baselines that validations are judged against, versioned in the coordinator")
               ->add_subcommand("list", "the baselines stored in the coordinator, newest first");
    sub_->add_option("name", name_, "only this name's versions");
    sub_->add_option("-o,--output", common.output, "table or json")->capture_default_str();
    return sub_;
  }
  std::string View() const override { return "baseline list"; }
  std::vector<std::string> Formats() const override { return {"table", "json"}; }
  int Run(Context& c) override {
    v1::ListBaselinesRequest req;
    req.set_name(name_);
    v1::ListBaselinesResponse resp;
    grpc::ClientContext ctx;
    Prepare(&ctx, c.common.timeout_seconds, c.common.token);
    if (grpc::Status s = c.stub.ListBaselines(&ctx, req, &resp); !s.ok()) {
      return RpcError(c.err, "list baselines", s, c.common.server);
    }
    if (c.format == OutputFormat::kJson) {
      std::string json;
      google::protobuf::util::JsonPrintOptions options;
      options.add_whitespace = true;
      (void)google::protobuf::util::MessageToJsonString(resp, &json, options);
      c.out << json;
      return kExitOk;
    }
    std::vector<std::vector<std::string>> rows;
    for (const v1::Baseline& b : resp.baselines()) {
      rows.push_back(
          {b.name(), absl::StrCat("v", b.version()), render::TimeString(b.created_unix_seconds()), b.source_job_id()});
    }
    c.out << (rows.empty() ? "no baseline stored; hetbench baseline save JOB --name NAME\n"
                           : FormatTable({"NAME", "VERSION", "SAVED", "FROM"}, rows));
    return kExitOk;
  }

 private:
  CLI::App* sub_ = nullptr;
  std::string name_;
};

}  // namespace

absl::StatusOr<v1::Baseline> ResolveBaseline(Context& c, const std::string& ref) {
  if (std::filesystem::exists(ref)) return ReadBaseline(ref);
  const size_t at = ref.rfind('@');
  const std::string name = ref.substr(0, at);
  int version = 0;
  if (at != std::string::npos && (!absl::SimpleAtoi(ref.substr(at + 1), &version) || version < 1)) {
    return absl::InvalidArgumentError(
        absl::StrCat(QuotedInput(ref), ": give NAME, NAME@VERSION (1, 2, ...) or a file"));
  }
  v1::GetBaselineRequest req;
  req.set_name(name);
  req.set_version(version);
  v1::Baseline b;
  grpc::ClientContext ctx;
  Prepare(&ctx, c.common.timeout_seconds, c.common.token);
  if (grpc::Status s = c.stub.GetBaseline(&ctx, req, &b); !s.ok()) {
    return absl::NotFoundError(
        absl::StrCat(QuotedInput(ref), ": no such file, and the coordinator says: ", s.error_message()));
  }
  return b;
}

std::vector<std::unique_ptr<Command>> BaselineCommands() {
  std::vector<std::unique_ptr<Command>> out;
  out.push_back(std::make_unique<BaselineSave>());
  out.push_back(std::make_unique<BaselineShow>());
  out.push_back(std::make_unique<BaselineDiff>());
  out.push_back(std::make_unique<BaselineList>());
  return out;
}

}  // namespace hetbench::client
