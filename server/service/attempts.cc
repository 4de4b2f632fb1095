#include "server/service/attempts.h"

#include <memory>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/log.h"
#include "common/names.h"

namespace hetbench::server {

namespace {
constexpr char kLog[] = "coordinator";
}  // namespace

v1::CoordinatorMessage AckMessage(const std::string& task_id, int attempt, uint64_t seq, bool power) {
  v1::CoordinatorMessage ack;
  ack.mutable_ack()->set_task_id(task_id);
  ack.mutable_ack()->set_attempt(attempt);
  ack.mutable_ack()->set_seq(seq);
  ack.mutable_ack()->set_power(power);
  return ack;
}

v1::CoordinatorMessage CancelMessage(const std::string& task_id, int attempt, const std::string& reason,
                                                  bool fenced) {
  v1::CoordinatorMessage msg;
  msg.mutable_cancel()->set_task_id(task_id);
  msg.mutable_cancel()->set_attempt(attempt);
  msg.mutable_cancel()->set_reason(reason);
  msg.mutable_cancel()->set_fenced(fenced);
  return msg;
}

void Attempts::Start(LiveJob& live, const TaskStart& start) {
  v1::Task& task = *live.job.mutable_tasks(start.index);
  const Placement& placement = start.placement;
  const std::string executor = ExecutorFor(task.target(), placement.device);
  task.clear_pending_reason();
  task.set_executor(executor);
  task.set_state(v1::TASK_STATE_RUNNING);
  task.set_attempt(task.attempt() + 1);
  task.set_resumes(0);
  task.set_agent_id(placement.agent_id);
  task.set_device_id(placement.device.id());
  task.set_device_kind(placement.device.kind());
  task.clear_stage_device_ids();
  for (const std::string& d : start.stage_device_ids) task.add_stage_device_ids(d);
  p_.placer->Lease(task);
  task.set_started_unix_seconds(p_.clock->SystemNowSeconds());
  task.set_phase(v1::PHASE_UNSPECIFIED);
  task.set_step(0);
  task.set_total_steps(0);
  task.clear_result();
  p_.jobs->MarkTask(live, task);
  p_.ingest->Begin(task.id(), task.attempt());
  v1::CoordinatorMessage msg;
  v1::Assign* assign = msg.mutable_assign();
  assign->set_task_id(task.id());
  assign->set_attempt(task.attempt());
  assign->set_device_id(placement.device.id());
  assign->set_batch_size(task.batch_size());
  assign->set_target_qps(task.target_qps());
  assign->set_model(task.model());
  assign->set_executor(executor);
  *assign->mutable_spec() = live.job.spec();
  for (const std::string& d : start.stage_device_ids) assign->add_stage_device_ids(d);
  if (start.gang) *assign->mutable_gang() = *start.gang;
  p_.metrics->AddTaskAssigned();
  LogDebug(kLog, "assigned ", task.id(), " attempt ", task.attempt(), " to ", placement.agent_id, "/",
           placement.device.id());
  SendAfterCommit(placement.agent_id, std::move(msg));
  if (start.gang && start.gang->rank() == 0) {
    LogInfo(kLog, "gang ", start.gang->gang_id(), " of ", start.gang->world_size(), " started on ",
            absl::StrJoin(start.gang->peers(), ", "), " (store ", start.gang->master_host(), ":",
            start.gang->master_port(), ")");
  }
}

void Attempts::SendAfterCommit(const std::string& agent_id, v1::CoordinatorMessage msg) {
  auto sink = p_.sessions->OfAgent(agent_id)->sink;
  defer_([sink, msg = std::move(msg)](const absl::Status& commit) {
    if (commit.ok()) sink->Send(msg);
  });
}

void Attempts::Finish(LiveJob& live, v1::Task& task, v1::TaskState state, const std::string& error) {
  task.set_state(state);
  task.set_error(error);
  task.clear_pending_reason();
  const double now = p_.clock->SystemNowSeconds();
  task.set_finished_unix_seconds(now);
  const double duration = now - task.started_unix_seconds();
  p_.ingest->End(task.id());
  p_.jobs->MarkTask(live, task);
  const std::string model = task.model();
  const v1::DeviceKind kind = task.device_kind();
  const bool simulated = task.result().environment().simulated();
  auto result = std::make_shared<v1::TaskResult>(task.result());
  defer_([metrics = p_.metrics, model, kind, state, duration, result, simulated](const absl::Status& commit) {
    if (!commit.ok()) return;
    metrics->ObserveTaskFinished(model, kind, state, duration);
    // Simulated figures never reach the measured per-model gauges.
    if (state == v1::TASK_STATE_SUCCEEDED && !simulated) metrics->SetTaskFigures(model, kind, *result);
  });
  LogInfo(kLog, "task ", task.id(), " attempt ", task.attempt(), " ", TaskStateName(state), error.empty() ? "" : ": ",
          error);
  Recompute(live);
  p_.watches->Changed(live.job.id(), absl::StrCat("task ", task.id(), " ", TaskStateName(state)));
  if (state == v1::TASK_STATE_FAILED) BreakGang(live, task);
}

void Attempts::FailEach(LiveJob& live, const std::vector<std::pair<int, std::string>>& failed) {
  breaking_gang_ = true;  // each with its own error, not worded as another rank's
  for (const auto& [index, error] : failed) Finish(live, *live.job.mutable_tasks(index), v1::TASK_STATE_FAILED, error);
  breaking_gang_ = false;
}

void Attempts::RequeueOrFail(LiveJob& live, v1::Task& task, const std::string& why, bool restart) {
  p_.ingest->End(task.id());
  // Restarts are the coordinator's fault, not the task's: they are counted
  // apart from attempts, and bounded on their own.
  if (restart) task.set_restarts(task.restarts() + 1);
  if (live.job.state() == v1::JOB_STATE_CANCELLED) {
    Finish(live, task, v1::TASK_STATE_CANCELLED, why);
  } else if (restart && task.restarts() > limits_.max_restarts) {
    // A task that keeps being interrupted by restarts may be what brings the coordinator down.
    Finish(
        live, task, v1::TASK_STATE_FAILED,
        absl::StrCat(why, "; ", task.restarts(), " restarts interrupted it (at most ", limits_.max_restarts, ")"));
  } else if (!restart && task.attempt() - task.restarts() >= limits_.max_attempts) {
    Finish(live, task, v1::TASK_STATE_FAILED, absl::StrCat(why, "; no attempts left"));
  } else {
    task.set_state(v1::TASK_STATE_QUEUED);
    task.set_error(why);
    task.clear_agent_id();
    task.clear_device_id();
    task.clear_stage_device_ids();
    task.set_queued_unix_seconds(p_.clock->SystemNowSeconds());
    p_.jobs->MarkTask(live, task);
    Recompute(live);
    p_.watches->Changed(live.job.id(), absl::StrCat("task ", task.id(), " re-queued: ", why));
    p_.placer->Request();
    BreakGang(live, task);
  }
}

void Attempts::Lose(const std::string& task_id, const std::string& detail, bool restart) {
  LiveJob* live = nullptr;
  v1::Task* task = p_.jobs->FindTask(task_id, &live);
  if (task == nullptr || task->state() != v1::TASK_STATE_RUNNING) return;
  RequeueOrFail(*live, *task, absl::StrCat("attempt ", task->attempt(), " lost: agent ", task->agent_id(), " ", detail),
                restart);
}

void Attempts::BreakGang(LiveJob& live, const v1::Task& cause) {
  if (cause.gang().world_size() <= 1 || breaking_gang_) return;
  breaking_gang_ = true;
  v1::Job& job = live.job;
  const int first = cause.index() - cause.gang().rank();
  const bool retry = cause.state() == v1::TASK_STATE_QUEUED;
  const std::string why = absl::StrCat("gang ", cause.gang().id(), ": rank ", cause.gang().rank(), " ",
                                       retry ? "is retried" : TaskStateName(cause.state()), ": ", cause.error());
  for (int r = 0; r < cause.gang().world_size() && first + r < job.tasks_size(); ++r) {
    v1::Task& t = *job.mutable_tasks(first + r);
    if (t.id() == cause.id()) continue;
    if (t.state() == v1::TASK_STATE_RUNNING) {
      // Fenced: the rank stops and what it did not deliver is dropped.
      if (p_.sessions->Connected(t.agent_id())) {
        SendAfterCommit(t.agent_id(), CancelMessage(t.id(), t.attempt(), why, /*fenced=*/true));
      }
      p_.placer->Release(t);
      if (retry) {
        RequeueOrFail(live, t, why, /*restart=*/false);
      } else {
        Finish(live, t, v1::TASK_STATE_FAILED, why);
      }
    } else if (t.state() == v1::TASK_STATE_SUCCEEDED && retry) {
      // The whole gang runs again: one rank's result alone is not the gang's.
      t.set_state(v1::TASK_STATE_QUEUED);
      t.set_error(why);
      t.clear_result();
      t.set_queued_unix_seconds(p_.clock->SystemNowSeconds());
      p_.jobs->MarkTask(live, t);
    } else if (t.state() == v1::TASK_STATE_QUEUED && !retry) {
      Finish(live, t, v1::TASK_STATE_FAILED, why);
    }
  }
  breaking_gang_ = false;
  Recompute(live);
  p_.placer->Request();
}

}  // namespace hetbench::server
