// Tasks that hold several devices: the ranks of a gang (data parallel, or a
// split across agents: one task per rank, placed all at once or not at all)
// and split tasks on one agent (one task, a device per stage). Loop thread
// only.
//
// Why no deadlock: a gang is placed inside one scheduling pass, which is
// serial and sees every free device; it takes all its devices or gives back
// what it took before the pass goes on. No device is ever leased for a gang
// that is not starting, so two gangs cannot each hold half of what the
// other needs. Fairness: a gang queued longer than gang_hold_after_seconds
// holds, within each pass only, the free devices it could use, so single
// tasks behind it cannot keep taking them; the queue is walked oldest job
// first, so the oldest waiting gang holds first and gets every device that
// frees, and younger work waits behind it.

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "common/log.h"
#include "common/names.h"
#include "server/service/coordinator.h"

namespace hetbench::server {

namespace {
constexpr char kLog[] = "coordinator";
}  // namespace

v1::CoordinatorMessage Coordinator::StartAttempt(LiveJob& live, v1::Task& task, const Placement& placement) {
  leases_.Acquire(placement.agent_id, placement.device.id(), task.id());
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
  task.set_started_unix_seconds(clock_->SystemNowSeconds());
  task.set_phase(v1::PHASE_UNSPECIFIED);
  task.set_step(0);
  task.set_total_steps(0);
  task.clear_result();
  jobs_.MarkTask(live, task);
  TaskAggregate& agg = aggregates_[task.id()];
  agg = TaskAggregate{};
  agg.attempt = task.attempt();
  v1::CoordinatorMessage msg;
  v1::Assign* assign = msg.mutable_assign();
  assign->set_task_id(task.id());
  assign->set_attempt(task.attempt());
  assign->set_device_id(placement.device.id());
  assign->set_batch_size(task.batch_size());
  assign->set_model(task.model());
  assign->set_executor(executor);
  *assign->mutable_spec() = live.job.spec();
  metrics_->AddTaskAssigned();
  LogDebug(kLog, "assigned ", task.id(), " attempt ", task.attempt(), " to ", placement.agent_id, "/",
           placement.device.id());
  return msg;
}

void Coordinator::SendAfterCommit(const std::string& agent_id, v1::CoordinatorMessage msg) {
  auto sink = sessions_.OfAgent(agent_id)->sink;
  loop_.Defer([sink, msg = std::move(msg)](const absl::Status& commit) {
    if (commit.ok()) sink->Send(msg);
  });
}

void Coordinator::ReleaseTaskDevices(const v1::Task& task) {
  leases_.Release(task.agent_id(), task.device_id());
  for (const std::string& d : task.stage_device_ids()) {
    if (leases_.TaskOn(task.agent_id(), d) == task.id()) leases_.Release(task.agent_id(), d);
  }
}

Coordinator::Placed Coordinator::PlaceGang(LiveJob& live, int first, SchedulingPass& pass, std::string* why) {
  v1::Job& job = live.job;
  const v1::Task& head = job.tasks(first);
  const int world = head.gang().world_size();
  if (first + world > job.tasks_size()) return Placed::kWaiting;  // cannot happen: CreateJob made them
  for (int r = 0; r < world; ++r) {
    // After a failure every rank is back in the queue (BreakGang); one still
    // running means its agent has not confirmed the stop yet.
    if (job.tasks(first + r).state() != v1::TASK_STATE_QUEUED) {
      *why = absl::StrCat("gang ", head.gang().id(), ": waiting for rank ", r, " to stop");
      return Placed::kWaiting;
    }
  }
  // A data-parallel gang's ranks share one target; a split's ranks each have their stage's.
  const bool split = job.spec().split().across_agents();
  const double gang_timeout =
      split ? job.spec().split().gang_timeout_seconds() : job.spec().parallel().gang_timeout_seconds();
  std::vector<v1::TargetSelector> targets;
  for (int r = 0; r < world; ++r) targets.push_back(job.tasks(first + r).target());
  size_t got = 0;
  auto placements = pass.TakeAll(targets, /*same_agent=*/false, &got);
  if (!placements) {
    const double waited = clock_->SystemNowSeconds() - head.queued_unix_seconds();
    const bool expired = gang_timeout > 0 && waited > gang_timeout;
    // PendingReason speaks of a target with no free device; with some free, the count says it.
    if (split) {
      std::vector<std::string> kinds;
      for (const v1::TargetSelector& t : targets) kinds.push_back(DescribeTarget(t));
      const v1::TargetSelector& missing = targets[std::min(got, targets.size() - 1)];
      *why = absl::StrCat("split ", head.gang().id(), " needs ", absl::StrJoin(kinds, " + "),
                          " at once (a stage per device, any agents): stage ", got, " has none free; ",
                          pass.Reason(missing));
    } else {
      *why = absl::StrCat("gang ", head.gang().id(), " needs ", world, " x ", DescribeTarget(head.target()),
                          " at once: ", got, " free now",
                          got == 0 ? absl::StrCat("; ", pass.Reason(head.target())) : "");
    }
    // Waiting long: hold what is free for it in this pass (nothing leased),
    // so later tasks stop taking the devices it needs one by one.
    const double hold_after = options_.gang_hold_after_seconds;
    if (!expired && hold_after >= 0 && waited >= hold_after && pass.Fits(targets)) {
      if (const size_t held = pass.Hold(targets, absl::StrCat(split ? "split " : "gang ", head.gang().id()))) {
        absl::StrAppend(why, "; holding ", held, " free device", held == 1 ? "" : "s", " for it (queued ",
                        absl::StrFormat("%.0f", waited), " s, holds after ", hold_after, " s)");
      }
    }
    if (expired) {
      const std::string error =
          absl::StrFormat("waited %.0f s (%s.gang_timeout_seconds = %g): %s", waited, split ? "split" : "parallel",
                          gang_timeout, *why);
      for (int r = 0; r < world; ++r) FinishTask(live, *job.mutable_tasks(first + r), v1::TASK_STATE_FAILED, error);
      return Placed::kFailed;
    }
    gangs_waiting_ = true;
    return Placed::kWaiting;
  }
  // Rank 0's agent hosts the TCPStore, on its port for rank 0's device.
  const v1::Hello& master = sessions_.OfAgent((*placements)[0].agent_id)->hello;
  int device_index = 0;
  for (int d = 0; d < master.devices_size(); ++d) {
    if (master.devices(d).id() == (*placements)[0].device.id()) device_index = d;
  }
  v1::GangAssign gang;
  gang.set_gang_id(head.gang().id());
  gang.set_world_size(world);
  gang.set_master_host(master.rendezvous_host().empty() ? "127.0.0.1" : master.rendezvous_host());
  gang.set_master_port(master.rendezvous_port_base() > 0 ? master.rendezvous_port_base() + device_index : 0);
  gang.set_timeout_seconds(split ? job.spec().split().collective_timeout_seconds()
                                 : job.spec().parallel().collective_timeout_seconds());
  for (const Placement& p : *placements) gang.add_peers(absl::StrCat(p.agent_id, "/", p.device.id()));
  for (int r = 0; r < world; ++r) {
    v1::Task& task = *job.mutable_tasks(first + r);
    v1::CoordinatorMessage msg = StartAttempt(live, task, (*placements)[r]);
    *msg.mutable_assign()->mutable_gang() = gang;
    msg.mutable_assign()->mutable_gang()->set_rank(r);
    SendAfterCommit((*placements)[r].agent_id, std::move(msg));
  }
  LogInfo(kLog, "gang ", head.gang().id(), " of ", world, " started on ", absl::StrJoin(gang.peers(), ", "),
          " (store ", gang.master_host(), ":", gang.master_port(), ")");
  return Placed::kStarted;
}

Coordinator::Placed Coordinator::PlaceSplit(LiveJob& live, v1::Task& task, SchedulingPass& pass, std::string* why) {
  const v1::SplitSpec& split = live.job.spec().split();
  std::vector<v1::TargetSelector> targets;
  for (const v1::SplitStage& stage : split.stages()) {
    targets.push_back(SplitStageTarget(stage, task.target(), /*same_agent=*/true));
  }
  size_t got = 0;
  auto placements = pass.TakeAll(targets, /*same_agent=*/true, &got);
  if (!placements) {
    std::vector<std::string> kinds;
    for (const v1::TargetSelector& t : targets) kinds.push_back(DescribeTarget(t));
    *why = absl::StrCat("split needs one agent with ", absl::StrJoin(kinds, " + "), " free at once: the best agent has ",
                        got, " of ", targets.size(), " stages; ", pass.Reason(targets[got < targets.size() ? got : 0]));
    return Placed::kWaiting;
  }
  v1::CoordinatorMessage msg = StartAttempt(live, task, (*placements)[0]);
  for (size_t s = 1; s < placements->size(); ++s) {
    const std::string& device = (*placements)[s].device.id();
    task.add_stage_device_ids(device);
    msg.mutable_assign()->add_stage_device_ids(device);
    leases_.Acquire(task.agent_id(), device, task.id());  // false when stage 0 (or another) holds it already
  }
  SendAfterCommit(task.agent_id(), std::move(msg));
  return Placed::kStarted;
}

void Coordinator::BreakGang(LiveJob& live, const v1::Task& cause) {
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
      if (sessions_.Connected(t.agent_id())) {
        SendAfterCommit(t.agent_id(), CancelMessage(t.id(), t.attempt(), why, /*fenced=*/true));
      }
      ReleaseTaskDevices(t);
      if (retry) {
        RequeueOrFail(live, t, why, /*restart=*/false);
      } else {
        FinishTask(live, t, v1::TASK_STATE_FAILED, why);
      }
    } else if (t.state() == v1::TASK_STATE_SUCCEEDED && retry) {
      // The whole gang runs again: one rank's result alone is not the gang's.
      t.set_state(v1::TASK_STATE_QUEUED);
      t.set_error(why);
      t.clear_result();
      t.set_queued_unix_seconds(clock_->SystemNowSeconds());
      jobs_.MarkTask(live, t);
    } else if (t.state() == v1::TASK_STATE_QUEUED && !retry) {
      FinishTask(live, t, v1::TASK_STATE_FAILED, why);
    }
  }
  breaking_gang_ = false;
  RecomputeJobState(live);
  schedule_needed_ = true;
}

}  // namespace hetbench::server
