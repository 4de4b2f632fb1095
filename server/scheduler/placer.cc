#include "server/scheduler/placer.h"

#include <algorithm>
#include <set>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "common/serving_spec.h"
#include "common/validate_spec.h"

namespace hetbench::server {

void Placer::Lease(const v1::Task& task) {
  leases_.Acquire(task.agent_id(), task.device_id(), task.id());
  // A stage may share stage 0's device (then Acquire finds it leased already).
  for (const std::string& d : task.stage_device_ids()) leases_.Acquire(task.agent_id(), d, task.id());
}

void Placer::Release(const v1::Task& task) {
  if (leases_.TaskOn(task.agent_id(), task.device_id()) == task.id()) leases_.Release(task.agent_id(), task.device_id());
  for (const std::string& d : task.stage_device_ids()) {
    if (leases_.TaskOn(task.agent_id(), d) == task.id()) leases_.Release(task.agent_id(), d);
  }
}

std::vector<std::string> Placer::ReleaseAgent(const std::string& agent_id, const std::vector<std::string>& keep) {
  std::vector<std::string> released;
  std::set<std::string> seen(keep.begin(), keep.end());
  for (const std::string& device_id : leases_.LeasedDevices(agent_id)) {
    const std::string task_id = leases_.TaskOn(agent_id, device_id);
    if (std::find(keep.begin(), keep.end(), task_id) != keep.end()) continue;
    leases_.Release(agent_id, device_id);
    if (seen.insert(task_id).second) released.push_back(task_id);  // a split's stages: once
  }
  return released;
}

bool Placer::TakeDue(int64_t monotonic_ns) {
  if (gangs_waiting_ && monotonic_ns - last_gang_pass_ns_ > 1'000'000'000) {
    last_gang_pass_ns_ = monotonic_ns;
    requested_ = true;  // for the gangs' timeouts and holds
  }
  const bool due = requested_;
  requested_ = false;
  return due;
}

SchedulingPass Placer::BeginPass(const std::vector<const v1::Hello*>& agents,
                                 const std::vector<const std::vector<std::string>*>* resources) {
  gangs_waiting_ = false;
  return SchedulingPass(agents, leases_, &quarantine_, resources);
}

void Placer::SetHealth(const std::string& agent_id, const v1::DeviceHealth& health) {
  const std::pair<std::string, std::string> key{agent_id, health.device_id()};
  if (health.verdict() == v1::VERDICT_PASS) {
    health_.erase(key);
  } else {
    health_[key] = health;
  }
  if (health.quarantined()) {
    quarantine_[key] = health;
  } else if (quarantine_.erase(key) > 0) {
    requested_ = true;  // released: its queued tasks may start
  }
}

namespace {

bool Ended(const v1::Task& t) { return t.state() != v1::TASK_STATE_QUEUED && t.state() != v1::TASK_STATE_RUNNING; }

}  // namespace

int EarlierRun(const v1::Job& job, int index) {
  const v1::Task& task = job.tasks(index);
  const int repeats = job.spec().repeats();
  // JobTable makes the tasks run by run, each run one block of the same configurations.
  if (task.run() <= 1 || repeats <= 1 || job.tasks_size() % repeats != 0) return -1;
  const int earlier = index - job.tasks_size() / repeats;
  return earlier >= 0 && job.tasks(earlier).run() == task.run() - 1 ? earlier : -1;
}

std::string WaitForEarlierRun(const v1::Job& job, int index, int ranks) {
  const int earlier = EarlierRun(job, index);
  if (earlier < 0) return "";
  for (int r = 0; r < ranks && earlier + r < job.tasks_size(); ++r) {
    const v1::Task& e = job.tasks(earlier + r);
    if (!Ended(e)) {
      return absl::StrCat("run ", job.tasks(index).run(), " waits for run ", e.run(), " (", e.id(),
                          ") to end: the runs of one configuration run one after another");
    }
  }
  return "";
}

JobPlacement Placer::PlaceJob(const v1::Job& job, SchedulingPass& pass, double now_seconds) {
  JobPlacement out;
  // one_at_a_time: the first queued task (or gang) goes when none of the job
  // runs; every later one waits behind it, in order.
  std::string ahead;  // why the rest wait: the task running, or the queued one before them
  if (job.spec().one_at_a_time()) {
    for (const v1::Task& t : job.tasks()) {
      if (t.state() == v1::TASK_STATE_RUNNING) {
        ahead = absl::StrCat("one at a time: waits for ", t.id(), " to end");
        break;
      }
    }
  }
  for (int i = 0; i < job.tasks_size(); ++i) {
    const v1::Task& task = job.tasks(i);
    if (task.state() != v1::TASK_STATE_QUEUED) continue;
    const int ranks = task.gang().world_size() > 0 ? task.gang().world_size() : 1;
    if (task.gang().world_size() > 0 && task.gang().rank() != 0) continue;  // placed with rank 0
    if (!ahead.empty()) {
      for (int r = 0; r < ranks && i + r < job.tasks_size(); ++r) out.waiting.emplace_back(i + r, ahead);
      continue;
    }
    if (job.spec().one_at_a_time()) {  // started now, or queued first: the rest wait behind it
      ahead = absl::StrCat("one at a time: waits for ", task.id(), " to end (it comes first, queued or starting)");
    }
    if (std::string why = WaitForEarlierRun(job, i, ranks); !why.empty()) {
      for (int r = 0; r < ranks && i + r < job.tasks_size(); ++r) out.waiting.emplace_back(i + r, why);
      continue;
    }
    if (task.gang().world_size() > 0) {
      PlaceGang(job, i, pass, now_seconds, &out);  // the other ranks with it
      continue;
    }
    std::string why;
    if (job.spec().split().stages_size() > 0) {
      if (PlaceSplit(job, i, pass, &out, &why)) continue;
    } else if (auto placement = pass.Take(task.target())) {
      out.starts.push_back(TaskStart{i, *std::move(placement), {}, std::nullopt});
      continue;
    } else {
      why = pass.Reason(task.target());  // bounded, cached per target
    }
    out.waiting.emplace_back(i, std::move(why));
  }
  return out;
}

void Placer::PlaceGang(const v1::Job& job, int first, SchedulingPass& pass, double now_seconds, JobPlacement* out) {
  const v1::Task& head = job.tasks(first);
  const int world = head.gang().world_size();
  if (first + world > job.tasks_size()) return;  // cannot happen: the job was made with every rank
  auto wait = [&](const std::string& why) {
    for (int r = 0; r < world; ++r) out->waiting.emplace_back(first + r, why);
  };
  for (int r = 0; r < world; ++r) {
    // After a failure every rank is back in the queue (the coordinator breaks
    // the gang); one still running means its agent has not confirmed the stop.
    if (job.tasks(first + r).state() != v1::TASK_STATE_QUEUED) {
      wait(absl::StrCat("gang ", head.gang().id(), ": waiting for rank ", r, " to stop"));
      return;
    }
  }
  // A data-parallel gang's ranks share one target; a split's ranks each have their stage's.
  const bool split = job.spec().split().across_agents();
  // A validation's all-reduce pair waits for its two pinned devices as its
  // other tasks do (no queue timeout); each collective has the test's box.
  const bool validate = IsValidate(job.spec());
  // A serving run's replicas: each on an agent of its own (one connection, one issuer per agent).
  const bool replicas = IsServing(job.spec());
  const double gang_timeout = validate   ? 0
                              : split    ? job.spec().split().gang_timeout_seconds()
                              : replicas ? job.spec().serving().replica_timeout_seconds()
                                         : job.spec().parallel().gang_timeout_seconds();
  std::vector<v1::TargetSelector> targets;
  for (int r = 0; r < world; ++r) targets.push_back(job.tasks(first + r).target());
  size_t got = 0;
  auto placements = pass.TakeAll(targets, /*same_agent=*/false, &got, /*distinct_agents=*/replicas);
  if (!placements) {
    // Waiting for the configuration's earlier run does not count towards the timeout.
    const int earlier = EarlierRun(job, first);
    double since = std::max(head.queued_unix_seconds(), earlier < 0 ? 0.0 : job.tasks(earlier).finished_unix_seconds());
    if (job.spec().one_at_a_time()) {  // nor does waiting for the tasks ahead of it
      for (const v1::Task& t : job.tasks()) since = std::max(since, t.finished_unix_seconds());
    }
    const double waited = now_seconds - since;
    const bool expired = gang_timeout > 0 && waited > gang_timeout;
    std::string why;
    // The pass's reason speaks of a target with no free device; with some free, the count says it.
    if (validate) {
      why = absl::StrCat("all-reduce pair ", head.gang().id(), " waits for both of its devices (",
                         DescribeTarget(targets[0]), " + ", DescribeTarget(targets[1]), "): ", got, " free now");
    } else if (split) {
      std::vector<std::string> kinds;
      for (const v1::TargetSelector& t : targets) kinds.push_back(DescribeTarget(t));
      const v1::TargetSelector& missing = targets[std::min(got, targets.size() - 1)];
      why = absl::StrCat("split ", head.gang().id(), " needs ", absl::StrJoin(kinds, " + "),
                         " at once (a stage per device, any agents): stage ", got, " has none free; ",
                         pass.Reason(missing));
    } else if (replicas) {
      why = absl::StrCat("serving replicas ", head.gang().id(), " need ", world, " x ", DescribeTarget(head.target()),
                         " at once, each on an agent of its own: ", got, " found on distinct agents now",
                         got == 0 ? absl::StrCat("; ", pass.Reason(head.target())) : "");
    } else {
      why = absl::StrCat("gang ", head.gang().id(), " needs ", world, " x ", DescribeTarget(head.target()),
                         " at once: ", got, " free now", got == 0 ? absl::StrCat("; ", pass.Reason(head.target())) : "");
    }
    // Waiting long: hold what is free for it in this pass (nothing leased),
    // so later tasks stop taking the devices it needs one by one.
    const double hold_after = options_.gang_hold_after_seconds;
    if (!expired && hold_after >= 0 && waited >= hold_after && pass.Fits(targets)) {
      if (const size_t held = pass.Hold(targets, absl::StrCat(split ? "split " : "gang ", head.gang().id()))) {
        absl::StrAppend(&why, "; holding ", held, " free device", held == 1 ? "" : "s", " for it (queued ",
                        absl::StrFormat("%.0f", waited), " s, holds after ", hold_after, " s)");
      }
    }
    if (expired) {
      const std::string error =
          absl::StrFormat("waited %.0f s (%s = %g): %s", waited,
                          split      ? "split.gang_timeout_seconds"
                          : replicas ? "serving.replica_timeout_seconds"
                                     : "parallel.gang_timeout_seconds",
                          gang_timeout, why);
      for (int r = 0; r < world; ++r) out->failed.emplace_back(first + r, error);
      return;
    }
    gangs_waiting_ = true;
    wait(why);
    return;
  }
  // Rank 0's agent hosts the TCPStore, on its port for rank 0's device.
  const Placement& zero = (*placements)[0];
  const v1::Hello& master = *zero.hello;
  int device_index = 0;
  for (int d = 0; d < master.devices_size(); ++d) {
    if (master.devices(d).id() == zero.device.id()) device_index = d;
  }
  v1::GangAssign gang;
  gang.set_gang_id(head.gang().id());
  // Rank 0's attempt rises every round (Attempts::Start counts it), so this
  // names the round; only when every rank's agent keys its store by it.
  bool rounds = true;
  for (const Placement& p : *placements) rounds = rounds && p.hello != nullptr && p.hello->gang_rounds();
  if (rounds) gang.set_round(absl::StrCat(head.gang().id(), "/", head.attempt() + 1));
  gang.set_world_size(world);
  gang.set_master_host(master.rendezvous_host().empty() ? "127.0.0.1" : master.rendezvous_host());
  gang.set_master_port(master.rendezvous_port_base() > 0 ? master.rendezvous_port_base() + device_index : 0);
  gang.set_timeout_seconds(validate   ? job.spec().validate().time_box_seconds()
                           : split    ? job.spec().split().collective_timeout_seconds()
                           : replicas ? kReplicaRendezvousSeconds
                                      : job.spec().parallel().collective_timeout_seconds());
  for (const Placement& p : *placements) gang.add_peers(absl::StrCat(p.agent_id, "/", p.device.id()));
  for (int r = 0; r < world; ++r) {
    TaskStart start{first + r, (*placements)[r], {}, gang};
    start.gang->set_rank(r);
    out->starts.push_back(std::move(start));
  }
}

bool Placer::PlaceSplit(const v1::Job& job, int index, SchedulingPass& pass, JobPlacement* out, std::string* why) {
  const v1::Task& task = job.tasks(index);
  std::vector<v1::TargetSelector> targets;
  for (const v1::SplitStage& stage : job.spec().split().stages()) {
    targets.push_back(SplitStageTarget(stage, task.target(), /*same_agent=*/true));
  }
  size_t got = 0;
  auto placements = pass.TakeAll(targets, /*same_agent=*/true, &got);
  if (!placements) {
    std::vector<std::string> kinds;
    for (const v1::TargetSelector& t : targets) kinds.push_back(DescribeTarget(t));
    *why = absl::StrCat("split needs one agent with ", absl::StrJoin(kinds, " + "), " free at once: the best agent has ",
                        got, " of ", targets.size(), " stages; ", pass.Reason(targets[got < targets.size() ? got : 0]));
    return false;
  }
  TaskStart start{index, (*placements)[0], {}, std::nullopt};
  for (size_t s = 1; s < placements->size(); ++s) start.stage_device_ids.push_back((*placements)[s].device.id());
  out->starts.push_back(std::move(start));
  return true;
}

}  // namespace hetbench::server
