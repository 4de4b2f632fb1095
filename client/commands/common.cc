#include <unistd.h>

#include <random>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "client/commands/command.h"
#include "common/names.h"

namespace hetbench::client {

/// Every call: its deadline and this caller's bearer token.
void Prepare(grpc::ClientContext* ctx, double seconds, const std::string& token) {
  ctx->set_deadline(std::chrono::system_clock::now() + std::chrono::milliseconds(static_cast<int64_t>(seconds * 1000)));
  AddToken(ctx, token);
}

int RpcError(std::ostream& err, const std::string& what, const grpc::Status& s, const std::string& server) {
  if (s.error_code() == grpc::StatusCode::UNAVAILABLE || s.error_code() == grpc::StatusCode::DEADLINE_EXCEEDED) {
    err << "hetbench: " << what << ": cannot reach the coordinator at " << server << " (" << s.error_message()
        << "); start hetbench-server or set --server / HETBENCH_SERVER\n";
  } else {
    err << "hetbench: " << what << ": " << s.error_message() << "\n";
  }
  return kExitFailed;
}

int ExitFor(const v1::Job& job) { return job.state() == v1::JOB_STATE_SUCCEEDED ? kExitOk : kExitFailed; }

/// GetJob, page after page of tasks, as one job.
grpc::Status FetchJob(Context& c, const std::string& job_id, v1::Job* job) {
  v1::GetJobRequest req;
  req.set_job_id(job_id);
  job->Clear();
  do {
    grpc::ClientContext ctx;
    Prepare(&ctx, c.common.timeout_seconds, c.common.token);
    v1::Job page;
    if (grpc::Status s = c.stub.GetJob(&ctx, req, &page); !s.ok()) return s;
    req.set_task_page_token(page.next_task_page_token());
    page.clear_next_task_page_token();
    if (job->id().empty()) {
      *job = std::move(page);
    } else {
      for (v1::Task& t : *page.mutable_tasks()) *job->add_tasks() = std::move(t);
    }
  } while (!req.task_page_token().empty());
  return grpc::Status::OK;
}

/// Every page of one task's stored samples or power readings (its current attempt).
grpc::Status FetchTaskData(Context& c, const std::string& task_id, v1::GetTaskDataRequest::Kind kind,
                           v1::TaskData* all) {
  v1::GetTaskDataRequest req;
  req.set_task_id(task_id);
  req.set_kind(kind);
  req.set_page_size(256);
  all->Clear();
  do {
    grpc::ClientContext ctx;
    Prepare(&ctx, c.common.timeout_seconds, c.common.token);
    v1::TaskData page;
    if (grpc::Status s = c.stub.GetTaskData(&ctx, req, &page); !s.ok()) return s;
    all->set_task_id(page.task_id());
    all->set_attempt(page.attempt());
    for (auto& b : *page.mutable_samples()) *all->add_samples() = std::move(b);
    for (auto& b : *page.mutable_power()) *all->add_power() = std::move(b);
    req.set_page_token(page.next_page_token());
  } while (!req.page_token().empty());
  return grpc::Status::OK;
}

/// Streams WatchJob until the job ends; draws progress bars when `draw`.
/// Returns the last job seen.
absl::StatusOr<v1::Job> WatchUntilEnd(Context& c, const std::string& job_id, double timeout_seconds, bool draw) {
  std::ostream& err = c.err;
  grpc::ClientContext ctx;
  Prepare(&ctx, timeout_seconds, c.common.token);
  v1::WatchJobRequest req;
  req.set_job_id(job_id);
  req.set_view(v1::JOB_VIEW_SUMMARY);  // progress needs states, not results
  auto reader = c.stub.WatchJob(&ctx, req);
  v1::JobEvent event;
  v1::Job last;
  const bool tty = isatty(STDERR_FILENO);
  size_t drawn = 0;
  std::vector<std::string> last_keys;
  while (reader->Read(&event)) {
    last = event.job();
    if (!draw) continue;
    std::vector<std::string> lines = ProgressLines(last, 30);
    lines.insert(lines.begin(), absl::StrCat(last.id(), " ", JobStateName(last.state())));
    if (tty) {
      if (drawn > 0) err << "\x1b[" << drawn << "F";  // back to the first line drawn
      for (const auto& l : lines) err << "\x1b[2K" << l << "\n";
      drawn = lines.size();
    } else {
      // Not a terminal (a log, CI): one line per task when its state, phase
      // or progress decile changes.
      std::vector<std::string> keys = {JobStateName(last.state())};
      for (const v1::Task& t : last.tasks()) {
        const int decile = t.total_steps() > 0 ? static_cast<int>(10 * t.step() / t.total_steps()) : 0;
        keys.push_back(absl::StrCat(t.state(), "/", t.phase(), "/", decile));
      }
      for (size_t i = 0; i < lines.size(); ++i) {
        if (i >= last_keys.size() || keys[i] != last_keys[i]) err << lines[i] << "\n";
      }
      last_keys = keys;
    }
    err.flush();
  }
  grpc::Status s = reader->Finish();
  if (!s.ok()) return absl::Status(static_cast<absl::StatusCode>(s.error_code()), s.error_message());
  return last;
}

CLI::App* Group(CLI::App& app, const std::string& name, const std::string& description) {
  for (CLI::App* sub : app.get_subcommands([&name](CLI::App* s) { return s->get_name() == name; })) return sub;
  CLI::App* group = app.add_subcommand(name, description);
  group->require_subcommand(1);
  return group;
}

std::string NewRequestId() {
  std::random_device rd;
  std::uniform_int_distribution<uint64_t> u;
  return absl::StrFormat("cli-%016x%016x", u(rd), u(rd));
}

std::vector<std::unique_ptr<Command>> AllCommands() {
  std::vector<std::unique_ptr<Command>> all;
  all.push_back(SubmitCommand());
  for (auto& c : GetCommands()) all.push_back(std::move(c));
  all.push_back(CancelCommand());
  all.push_back(ReportCommand());
  all.push_back(CompareCommand());
  all.push_back(AdviseCommand());
  all.push_back(HistoryCommand());
  all.push_back(WatchCommand());
  all.push_back(HealthCommand());
  all.push_back(ValidateCommand());
  for (auto& c : BaselineCommands()) all.push_back(std::move(c));
  return all;
}

}  // namespace hetbench::client
