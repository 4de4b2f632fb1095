#pragma once
/// Attempts: the life of a task's attempt. An attempt starts where the Placer
/// put it; it ends (succeeded, failed, cancelled), is re-queued within the
/// attempt and restart limits, or is lost with its agent; the ranks of a gang
/// follow one another (one re-queued or failed fences and re-queues or fails
/// the rest). Each transition changes the job table, the leases, Ingest's
/// attempt state, the watches and the metrics together, and queues what is
/// sent to agents until the batch commits.
///
/// Owns: nothing but the guard against a gang breaking itself again; it is
/// the one place that moves a task between states, over the parts it is given.
///
/// Threading: the coordinator's loop thread only. Time comes from the clock
/// given; what must wait for the commit goes through `defer` (EventLoop::Defer;
/// tests collect it).

#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "common/clock.h"
#include "hetbench/v1/agent.pb.h"
#include "server/ingest/ingest.h"
#include "server/metrics/metrics.h"
#include "server/scheduler/placer.h"
#include "server/service/job_table.h"
#include "server/service/session_table.h"
#include "server/service/watches.h"

namespace hetbench::server {

/// Messages to an agent about one attempt.
v1::CoordinatorMessage AckMessage(const std::string& task_id, int attempt, uint64_t seq, bool power);
/// Stop attempt `attempt` of `task_id`; `fenced`: it is no longer the agent's (drop what is undelivered).
v1::CoordinatorMessage CancelMessage(const std::string& task_id, int attempt, const std::string& reason, bool fenced);

class Attempts {
 public:
  struct Parts {
    JobTable* jobs;
    SessionTable* sessions;
    Placer* placer;
    Ingest* ingest;
    Watches* watches;
    Metrics* metrics;
    const Clock* clock;
  };
  struct Limits {
    int max_attempts = 3;   // per task, counting re-queues after agent loss and retryable failures
    int max_restarts = 10;  // coordinator restarts that may interrupt one task (not counted above)
  };
  /// Runs a closure after the batch commits, with the commit's status.
  using Defer = std::function<void(std::function<void(const absl::Status&)>)>;

  Attempts(Parts parts, Limits limits, Defer defer) : p_(parts), limits_(limits), defer_(std::move(defer)) {}

  /// Starts `start`'s task on its placement: its next attempt, its leases,
  /// a fresh Ingest state; its Assign is sent once the batch commits.
  void Start(LiveJob& job, const TaskStart& start);
  /// Ends the task's attempt in `state` with `error`; a failed gang rank fails its gang.
  void Finish(LiveJob& job, v1::Task& task, v1::TaskState state, const std::string& error);
  /// Fails each task of `failed` with its own error (a gang past its
  /// timeout: every rank says why, none is blamed on another).
  void FailEach(LiveJob& job, const std::vector<std::pair<int, std::string>>& failed);
  /// Puts a running attempt back in the queue, or fails it when it has no
  /// attempts (or restarts) left; `why` becomes its error. The caller freed
  /// its devices. A gang rank re-queued re-queues its gang.
  void RequeueOrFail(LiveJob& job, v1::Task& task, const std::string& why, bool restart);
  /// Re-queues (or fails, or cancels) the running attempt `task_id` whose
  /// agent is gone; the caller freed its devices. The error reads "attempt N
  /// lost: agent A <detail>". `restart`: lost to a coordinator restart.
  void Lose(const std::string& task_id, const std::string& detail, bool restart);
  /// The job's state from its tasks', at the clock's time.
  void Recompute(LiveJob& job) { p_.jobs->Recompute(job, p_.clock->SystemNowSeconds()); }
  /// Sends `msg` to the agent's current session once the batch commits.
  void SendAfterCommit(const std::string& agent_id, v1::CoordinatorMessage msg);

 private:
  /// After rank `cause` of a gang was re-queued or failed: the other ranks
  /// are fenced and follow it (re-queued with it, the gang retried as a
  /// whole; or failed).
  void BreakGang(LiveJob& job, const v1::Task& cause);

  const Parts p_;
  const Limits limits_;
  const Defer defer_;
  bool breaking_gang_ = false;
};

}  // namespace hetbench::server
