// hetbench get jobs | get job ID | get agents, cancel ID, watch ID, health.
#include <algorithm>

#include "client/commands/command.h"
#include "common/names.h"
#include "grpc/health/v1/health.grpc.pb.h"

namespace hetbench::client {

namespace {

class GetJobs final : public Command {
 public:
  CLI::App* Add(CLI::App& app, Common& common) override {
    CLI::App* sub = Group(app, "get", "list jobs or agents, or show one job")->add_subcommand("jobs", "list jobs");
    sub->add_option("--limit", limit_, "newest N jobs (0 = all)")->capture_default_str();
    sub->add_option("--state", state_, "only jobs in this state (queued, running, succeeded, failed, cancelled)");
    sub->add_option("--model", model_, "only jobs that run this model");
    sub->add_option("--kind", kind_, "only jobs with a target of this device kind");
    sub->add_option("--page-token", page_token_, "continue a listing where an earlier one stopped");
    sub->add_option("-o,--output", common.output, "table, json or csv")->capture_default_str();
    return sub;
  }
  std::string View() const override { return "get jobs"; }
  std::vector<std::string> Formats() const override { return {"table", "json", "csv"}; }

  int Run(Context& c) override {
    // Pages of at most 500, newest first, until --limit jobs (0: all) or the last page.
    v1::ListJobsRequest req;
    if (!state_.empty()) {
      auto state = ParseJobState(state_);
      if (!state) {
        c.err << "hetbench: --state " << state_ << ": use queued, running, succeeded, failed or cancelled\n";
        return kExitUsage;
      }
      req.set_state(*state);
    }
    if (!kind_.empty()) {
      auto kind = ParseDeviceKind(kind_);
      if (!kind) {
        c.err << "hetbench: --kind " << kind_ << ": use cpu, gpu, tpu, dpu or qpu-sim\n";
        return kExitUsage;
      }
      req.set_device_kind(*kind);
    }
    req.set_model(model_);
    req.set_page_token(page_token_);
    std::vector<v1::Job> jobs;
    std::string next;
    do {
      req.set_page_size(limit_ > 0 ? std::min<int>(500, limit_ - static_cast<int>(jobs.size())) : 500);
      grpc::ClientContext ctx;
      Prepare(&ctx, c.common.timeout_seconds, c.common.token);
      v1::ListJobsResponse resp;
      grpc::Status s = c.stub.ListJobs(&ctx, req, &resp);
      if (!s.ok()) return RpcError(c.err, "list jobs", s, c.common.server);
      for (v1::Job& j : *resp.mutable_jobs()) jobs.push_back(std::move(j));
      next = resp.next_page_token();
      req.set_page_token(next);
    } while (!next.empty() && (limit_ <= 0 || static_cast<int>(jobs.size()) < limit_));
    std::reverse(jobs.begin(), jobs.end());  // oldest first, the newest at the bottom
    c.out << RenderJobList(jobs, c.format);
    if (!next.empty()) c.err << "more jobs: --page-token " << next << "\n";
    return kExitOk;
  }

 private:
  int limit_ = 50;
  std::string state_, model_, kind_, page_token_;
};

class GetJob final : public Command {
 public:
  CLI::App* Add(CLI::App& app, Common& common) override {
    CLI::App* sub = Group(app, "get", "list jobs or agents, or show one job")->add_subcommand("job", "show one job");
    sub->add_option("id", job_id_, "job id")->required();
    sub->add_option("-o,--output", common.output, "table, json, csv (tasks) or yaml (the effective spec, for submit -f)")
        ->capture_default_str();
    return sub;
  }
  std::string View() const override { return "get job"; }
  std::vector<std::string> Formats() const override { return {"table", "json", "csv", "yaml"}; }
  int Run(Context& c) override {
    v1::Job job;
    if (grpc::Status s = FetchJob(c, job_id_, &job); !s.ok()) return RpcError(c.err, "get job", s, c.common.server);
    c.out << RenderJob(job, c.format);
    return kExitOk;
  }

 private:
  std::string job_id_;
};

class GetAgents final : public Command {
 public:
  CLI::App* Add(CLI::App& app, Common& common) override {
    CLI::App* sub = Group(app, "get", "list jobs or agents, or show one job")
                        ->add_subcommand("agents", "list connected agents and their devices");
    sub->add_option("-o,--output", common.output, "table, wide (drivers, executors, sensors), json or csv")
        ->capture_default_str();
    return sub;
  }
  std::string View() const override { return "get agents"; }
  std::vector<std::string> Formats() const override { return {"table", "wide", "json", "csv"}; }
  int Run(Context& c) override {
    grpc::ClientContext ctx;
    Prepare(&ctx, c.common.timeout_seconds, c.common.token);
    v1::ListAgentsResponse resp;
    grpc::Status s = c.stub.ListAgents(&ctx, v1::ListAgentsRequest(), &resp);
    if (!s.ok()) return RpcError(c.err, "list agents", s, c.common.server);
    c.out << RenderAgents({resp.agents().begin(), resp.agents().end()}, c.format);
    return kExitOk;
  }
};

class Cancel final : public Command {
 public:
  CLI::App* Add(CLI::App& app, Common& common) override {
    CLI::App* sub = app.add_subcommand("cancel", "cancel a job");
    sub->add_option("id", job_id_, "job id")->required();
    sub->add_option("-o,--output", common.output, "table (id and state) or json (the job)")->capture_default_str();
    return sub;
  }
  std::string View() const override { return "cancel"; }
  std::vector<std::string> Formats() const override { return {"table", "json"}; }
  int Run(Context& c) override {
    grpc::ClientContext ctx;
    Prepare(&ctx, c.common.timeout_seconds, c.common.token);
    v1::CancelJobRequest req;
    req.set_job_id(job_id_);
    v1::Job job;
    grpc::Status s = c.stub.CancelJob(&ctx, req, &job);
    if (!s.ok()) return RpcError(c.err, "cancel", s, c.common.server);
    if (c.format == OutputFormat::kJson) {
      c.out << RenderJob(job, OutputFormat::kJson);
    } else {
      c.out << job.id() << " " << JobStateName(job.state()) << "\n";
    }
    return kExitOk;
  }

 private:
  std::string job_id_;
};

class Watch final : public Command {
 public:
  CLI::App* Add(CLI::App& app, Common& common) override {
    CLI::App* sub = app.add_subcommand("watch", "show live progress of a job until it ends");
    sub->add_option("id", job_id_, "job id")->required();
    sub->add_option("--wait-timeout", wait_timeout_, "seconds to watch")->capture_default_str();
    sub->add_option("-o,--output", common.output, "table (live progress) or json (the ended job, no progress)")
        ->capture_default_str();
    return sub;
  }
  std::string View() const override { return "watch"; }
  std::vector<std::string> Formats() const override { return {"table", "json"}; }
  int Run(Context& c) override {
    const bool json = c.format == OutputFormat::kJson;
    auto final_job = WatchUntilEnd(c, job_id_, wait_timeout_, /*follow=*/!json);
    if (!final_job.ok()) {
      c.err << "hetbench: watching " << job_id_ << ": " << final_job.status().message() << "\n";
      return kExitFailed;
    }
    if (json) {
      v1::Job stored;  // the watch stream carries live state; the stored job has the results
      if (grpc::Status s = FetchJob(c, job_id_, &stored); !s.ok()) return RpcError(c.err, "get job", s, c.common.server);
      c.out << RenderJob(stored, OutputFormat::kJson);
    }
    return ExitFor(*final_job);
  }

 private:
  std::string job_id_;
  double wait_timeout_ = 24 * 3600;
};

class Health final : public Command {
 public:
  CLI::App* Add(CLI::App& app, Common& common) override {
    CLI::App* sub = app.add_subcommand("health", "check the coordinator's grpc.health.v1 status");
    sub->add_option("-o,--output", common.output, "table or json ({\"status\": \"SERVING\"})")->capture_default_str();
    return sub;
  }
  std::string View() const override { return "health"; }
  std::vector<std::string> Formats() const override { return {"table", "json"}; }
  int Run(Context& c) override {
    auto hstub = grpc::health::v1::Health::NewStub(c.channel);
    grpc::ClientContext ctx;
    Prepare(&ctx, c.common.timeout_seconds, c.common.token);
    grpc::health::v1::HealthCheckRequest req;
    grpc::health::v1::HealthCheckResponse resp;
    grpc::Status s = hstub->Check(&ctx, req, &resp);
    if (!s.ok()) return RpcError(c.err, "health", s, c.common.server);
    const bool serving = resp.status() == grpc::health::v1::HealthCheckResponse::SERVING;
    const char* status = serving ? "SERVING" : "NOT_SERVING";
    if (c.format == OutputFormat::kJson) {
      c.out << "{\"status\": \"" << status << "\"}\n";
    } else {
      c.out << status << "\n";
    }
    return serving ? kExitOk : kExitFailed;
  }
};

}  // namespace

std::vector<std::unique_ptr<Command>> GetCommands() {
  std::vector<std::unique_ptr<Command>> out;
  out.push_back(std::make_unique<GetJobs>());
  out.push_back(std::make_unique<GetJob>());
  out.push_back(std::make_unique<GetAgents>());
  return out;
}
std::unique_ptr<Command> CancelCommand() { return std::make_unique<Cancel>(); }
std::unique_ptr<Command> WatchCommand() { return std::make_unique<Watch>(); }
std::unique_ptr<Command> HealthCommand() { return std::make_unique<Health>(); }

}  // namespace hetbench::client
