// hetbench submit: a job from -f job.yaml and/or flags, idempotent across
// retries; --wait / --follow watch it and print its report.
#include <chrono>
#include <fstream>
#include <random>
#include <sstream>
#include <thread>

#include "absl/strings/str_format.h"
#include "client/commands/command.h"
#include "client/commands/spec_flags.h"
#include "common/job_spec.h"
#include "common/spec_yaml.h"

namespace hetbench::client {

namespace {

class Submit final : public Command {
 public:
  CLI::App* Add(CLI::App& app, Common& common) override {
    (void)common;
    sub_ = app.add_subcommand("submit", "submit a benchmark job (flags, or -f job.yaml)");
    sub_->add_option("-f,--file", spec_file_, "job spec YAML")->check(CLI::ExistingFile);
    AddSpecFlags(sub_, &flags_);
    sub_->add_flag("--wait", wait_, "wait for the job to end; print its report");
    sub_->add_flag("--follow", follow_, "like --wait, with live progress bars");
    sub_->add_option("--wait-timeout", wait_timeout_, "seconds to wait for the job")->capture_default_str();
    sub_->add_option("--retries", retries_,
                     "retries when the coordinator is unreachable or busy (same request id: never a second job)")
        ->capture_default_str()
        ->check(CLI::Range(0, 100));
    // The report's format with --wait; bound to the shared -o.
    sub_->add_option("-o,--output", common.output, "report format with --wait: table, json, csv")
        ->capture_default_str();
    return sub_;
  }
  std::string View() const override { return "submit --wait"; }
  std::vector<std::string> Formats() const override { return {"table", "json", "csv"}; }

  int Run(Context& c) override {
    if (!wait_ && !follow_ && c.common.output != "table") {
      c.err << "hetbench: submit -o " << c.common.output
            << ": the report's format, printed only with --wait or --follow; add one (without them submit prints "
               "the job id)\n";
      return kExitUsage;
    }
    v1::JobSpec spec;
    if (!spec_file_.empty()) {
      std::ifstream in(spec_file_);
      std::stringstream text;
      text << in.rdbuf();
      auto parsed = ParseJobSpecYaml(text.str());
      if (!parsed.ok()) {
        c.err << "hetbench: " << spec_file_ << ": " << parsed.status().message() << "\n";
        return kExitFailed;
      }
      spec = *parsed;
    }
    // Flags given on the command line override the file.
    NoteGivenFlags(*sub_, &flags_);
    auto applied = ApplySpecFlags(std::move(spec), flags_);
    if (!applied.ok()) {
      c.err << "hetbench: " << applied.status().message() << "\n";
      return kExitUsage;
    }
    for (const std::string& notice : UpgradeOldSpellings(&*applied)) c.err << "hetbench: notice: " << notice << "\n";
    // One request id per invocation, reused by every retry: a submit whose
    // answer was lost is never made twice.
    v1::SubmitJobRequest req;
    *req.mutable_spec() = std::move(*applied);
    req.set_request_id(NewRequestId());
    v1::SubmitJobResponse resp;
    grpc::Status s;
    for (int attempt = 0;; ++attempt) {
      grpc::ClientContext ctx;
      Prepare(&ctx, c.common.timeout_seconds, c.common.token);
      s = c.stub.SubmitJob(&ctx, req, &resp);
      const bool retry = s.error_code() == grpc::StatusCode::UNAVAILABLE ||
                         s.error_code() == grpc::StatusCode::DEADLINE_EXCEEDED ||
                         s.error_code() == grpc::StatusCode::RESOURCE_EXHAUSTED;
      if (s.ok() || !retry || attempt >= retries_) break;
      const double backoff = std::min(8.0, 0.5 * (1 << attempt));
      c.err << "hetbench: submit: " << s.error_message() << "; retrying in " << backoff << " s (request "
            << req.request_id() << ")\n";
      std::this_thread::sleep_for(std::chrono::milliseconds(static_cast<int64_t>(backoff * 1000)));
    }
    if (!s.ok()) return RpcError(c.err, "submit refused", s, c.common.server);
    if (resp.existing()) c.err << "hetbench: the coordinator already had this request: " << resp.job_id() << "\n";
    if (!wait_ && !follow_) {
      c.out << resp.job_id() << "\n";
      return kExitOk;
    }
    c.err << "submitted " << resp.job_id() << "\n";
    auto final_job = WatchUntilEnd(c, resp.job_id(), wait_timeout_, follow_);
    if (!final_job.ok()) {
      c.err << "hetbench: watching " << resp.job_id() << ": " << final_job.status().message() << "\n";
      return kExitFailed;
    }
    // The watch stream carries live state; the report reads the stored job.
    v1::Job job;
    s = FetchJob(c, resp.job_id(), &job);
    if (!s.ok()) return RpcError(c.err, "get job", s, c.common.server);
    c.out << RenderReport(job, c.format);
    return ExitFor(job);
  }

 private:
  CLI::App* sub_ = nullptr;
  std::string spec_file_;
  SpecFlags flags_;
  bool wait_ = false, follow_ = false;
  double wait_timeout_ = 24 * 3600;
  int retries_ = 4;
};

}  // namespace

std::unique_ptr<Command> SubmitCommand() { return std::make_unique<Submit>(); }

}  // namespace hetbench::client
