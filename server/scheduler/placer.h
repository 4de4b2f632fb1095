#pragma once
/// Placement: which queued task starts on which device. The Placer owns the
/// device leases and decides, job by job inside one scheduling pass, where
/// queued tasks go: single tasks, the ranks of a gang (data parallel, or a
/// split across agents: every rank at once or none), a split on one agent (a
/// device per stage, all on one agent), and the holds of a gang that waited
/// long. It decides only; the coordinator applies what it returns (starts
/// the attempts, fails the expired gangs, stores the pending reasons).
///
/// Why no deadlock: a gang is placed inside one pass, which is serial and
/// sees every free device; it takes all its devices or none. No device is
/// leased for a gang that is not starting, so two gangs cannot each hold half
/// of what the other needs. Fairness: a gang queued longer than
/// gang_hold_after_seconds holds, within the pass only, the free devices it
/// could use, so single tasks behind it cannot keep taking them one by one;
/// jobs are placed oldest first, so the oldest waiting gang holds first.
///
/// Threading: not thread-safe; the coordinator's event loop only. Time comes
/// in as arguments (tests drive it).

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "hetbench/v1/agent.pb.h"
#include "hetbench/v1/coordinator.pb.h"
#include "server/scheduler/scheduler.h"

namespace hetbench::server {

/// One queued task to start.
struct TaskStart {
  int index = 0;                              // in job.tasks
  Placement placement;                        // its device (a split's stage 0)
  std::vector<std::string> stage_device_ids;  // a split on one agent: stages 1.. in order
  std::optional<v1::GangAssign> gang;         // a gang's rank: its rendezvous, rank set
};

/// What one pass decided for one job.
struct JobPlacement {
  std::vector<TaskStart> starts;
  /// Tasks to fail, with their errors: the ranks of a gang queued past its
  /// gang_timeout_seconds.
  std::vector<std::pair<int, std::string>> failed;
  /// Tasks left waiting, with why (every rank of a waiting gang).
  std::vector<std::pair<int, std::string>> waiting;
};

/// Runs of one configuration (a spec's `repeats`) do not overlap: run r of
/// a task starts only after run r - 1 has ended, so the runs are apart in
/// time and two of them never share a machine's memory and caches (two CPU
/// agents on one host are two devices but one machine). Configurations still
/// run side by side on free devices.
/// The index of task `index`'s earlier run in `job` (the same configuration,
/// run - 1), or -1 when it has none.
int EarlierRun(const v1::Job& job, int index);
/// Why task `index` (and the `ranks` - 1 ranks after it, for a gang) waits for
/// its earlier run, or "" when that run has ended or there is none.
std::string WaitForEarlierRun(const v1::Job& job, int index, int ranks);

struct PlacerOptions {
  /// A gang queued this long holds the free devices it could use in each
  /// pass. < 0: never hold.
  double gang_hold_after_seconds = 60;
};

class Placer {
 public:
  explicit Placer(PlacerOptions options) : options_(options) {}

  /// The leases: (agent, device) -> task.
  const DeviceLeases& leases() const { return leases_; }
  /// Leases `task`'s device and its stages' devices to it (a placement being
  /// applied, or a running task reloaded after a restart).
  void Lease(const v1::Task& task);
  /// Frees every device `task` holds (its device and its stages').
  void Release(const v1::Task& task);
  /// Frees every device leased on `agent_id` and returns the task ids that
  /// held them, except those in `keep` (which stay leased).
  std::vector<std::string> ReleaseAgent(const std::string& agent_id, const std::vector<std::string>& keep);

  /// A device's last validation verdict that did not pass (FAIL, DEGRADED):
  /// kept for `get agents`; quarantined ones get no ordinary task (see
  /// SchedulingPass). A PASS (verdict VERDICT_PASS) clears the device.
  void SetHealth(const std::string& agent_id, const v1::DeviceHealth& health);
  /// Every device with a non-passing verdict, quarantined or not.
  const Quarantine& health() const { return health_; }
  const Quarantine& quarantine() const { return quarantine_; }

  /// Asks for a pass at the next end of batch (something queued or freed).
  void Request() { requested_ = true; }
  /// Whether a pass is due at `monotonic_ns`: one was requested, or a gang
  /// waits (a pass each second, for its timeout and holds). Clears the request.
  bool TakeDue(int64_t monotonic_ns);

  /// A pass over the connected agents' free devices, for PlaceJob
  /// (`resources`: as SchedulingPass's). Resets the waiting-gang flag: the
  /// pass's jobs set it again.
  SchedulingPass BeginPass(const std::vector<const v1::Hello*>& agents,
                           const std::vector<const std::vector<std::string>*>* resources = nullptr);
  /// Decides `job`'s queued tasks in `pass` at `now_seconds` (unix time, for
  /// gang timeouts and holds). Does not change the job or the leases.
  JobPlacement PlaceJob(const v1::Job& job, SchedulingPass& pass, double now_seconds);

 private:
  /// The gang whose rank 0 is job.tasks(first).
  void PlaceGang(const v1::Job& job, int first, SchedulingPass& pass, double now_seconds, JobPlacement* out);
  /// A split task on one agent; false with `*why` when it waits.
  bool PlaceSplit(const v1::Job& job, int index, SchedulingPass& pass, JobPlacement* out, std::string* why);

  const PlacerOptions options_;
  DeviceLeases leases_;
  Quarantine health_;      // devices whose last validation did not pass
  Quarantine quarantine_;  // those of them no ordinary task is placed on
  bool requested_ = true;
  bool gangs_waiting_ = false;
  int64_t last_gang_pass_ns_ = 0;
};

}  // namespace hetbench::server
