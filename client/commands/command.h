#pragma once
/// One `hetbench` subcommand: its flags, the output formats its view has, and
/// what it does. RunCli (client/cli.cc) registers every command, parses, refuses
/// a format the chosen view lacks, connects, and runs the one chosen.
/// Exit codes: 0 success, 1 the job failed or the request was refused (or the
/// server is unreachable), 2 usage error, 3 (validate) a device was DEGRADED or FAIL.

#include <grpcpp/client_context.h>

#include <CLI/CLI.hpp>
#include <memory>
#include <ostream>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "report/render.h"
#include "common/security.h"
#include "hetbench/v1/coordinator.grpc.pb.h"

namespace hetbench::client {

// The commands are the report library's front end: its formats and views are
// named here without the report:: prefix.
using namespace ::hetbench::report;  // NOLINT(google-build-using-namespace)

constexpr int kExitOk = 0;
constexpr int kExitFailed = 1;
constexpr int kExitUsage = 2;

/// Flags every command shares.
struct Common {
  std::string server = "127.0.0.1:50051";
  double timeout_seconds = 10.0;
  std::string output = "table";
  ClientSecurity security;
  std::string token;  // read from security.token_file
};

/// What a command runs with.
struct Context {
  Common& common;
  std::shared_ptr<grpc::Channel> channel;
  v1::Coordinator::Stub& stub;
  OutputFormat format;
  std::ostream& out;
  std::ostream& err;
};

class Command {
 public:
  virtual ~Command() = default;
  /// Adds the subcommand (under `app`, or under a group such as "get") with
  /// its flags bound to this object and `common`; returns it.
  virtual CLI::App* Add(CLI::App& app, Common& common) = 0;
  /// "get jobs", "report --study": how a refusal names the view.
  virtual std::string View() const = 0;
  /// The `-o` formats of the view chosen, e.g. {"table", "json", "csv"}.
  virtual std::vector<std::string> Formats() const = 0;
  virtual int Run(Context& ctx) = 0;
};

/// Every command, in help order.
std::vector<std::unique_ptr<Command>> AllCommands();

std::unique_ptr<Command> SubmitCommand();
std::vector<std::unique_ptr<Command>> GetCommands();  // get jobs, get job, get agents
std::unique_ptr<Command> CancelCommand();
std::unique_ptr<Command> ReportCommand();
std::unique_ptr<Command> CompareCommand();
std::unique_ptr<Command> AdviseCommand();
std::unique_ptr<Command> HistoryCommand();
std::unique_ptr<Command> WatchCommand();
std::unique_ptr<Command> HealthCommand();
std::unique_ptr<Command> ValidateCommand();
std::vector<std::unique_ptr<Command>> BaselineCommands();  // baseline save, show, diff, list

// Shared by the commands.

/// 128 random bits, hex: the idempotency key of one submit invocation.
std::string NewRequestId();
/// Every call: its deadline and this caller's bearer token.
void Prepare(grpc::ClientContext* ctx, double seconds, const std::string& token);
/// Prints what went wrong (unreachable: how to point at a coordinator); returns kExitFailed.
int RpcError(std::ostream& err, const std::string& what, const grpc::Status& s, const std::string& server);
int ExitFor(const v1::Job& job);
/// GetJob, page after page of tasks, as one job.
grpc::Status FetchJob(Context& ctx, const std::string& job_id, v1::Job* job);
/// Every page of one task's stored samples or power readings (its current attempt).
grpc::Status FetchTaskData(Context& ctx, const std::string& task_id, v1::GetTaskDataRequest::Kind kind,
                           v1::TaskData* all);
/// Follows a job until it ends; draws progress on `err` when `draw`.
absl::StatusOr<v1::Job> WatchUntilEnd(Context& ctx, const std::string& job_id, double timeout_seconds, bool draw);
/// A baseline named NAME[@VERSION] in the coordinator (the latest without
/// @), or a JSON file `baseline save --out` wrote (checked field by field).
absl::StatusOr<v1::Baseline> ResolveBaseline(Context& ctx, const std::string& ref);
/// The group subcommand `name` of `app`, made on first use.
CLI::App* Group(CLI::App& app, const std::string& name, const std::string& description);

}  // namespace hetbench::client
