#pragma once
/// One task attempt an agent holds, from its start until the coordinator has
/// acknowledged everything it produced: the task thread's control and
/// result, and the outbox the pump drains into sample, power, progress and
/// TaskDone messages. Every batch and the TaskDone stay in the outbox until
/// acknowledged (the coordinator acks once they are durable) and go out
/// again on the next stream.
///
/// Threads: the task thread writes `result` and then sets `finished`; the
/// pump thread alone calls PumpPass and ResendOutstanding and owns the
/// send counters; acks and rejections (the reader thread) touch only what
/// `out_mu` guards.

#include <atomic>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "agent/agent_config.h"
#include "agent/executors/executor.h"
#include "agent/power/power_sampler.h"
#include "hetbench/v1/agent.pb.h"

namespace hetbench::agent {

/// Whether an executor's failure may not recur on another attempt (device
/// busy, out of memory, transient I/O): the TaskDone says `retryable`.
bool IsRetryable(const absl::Status& status);

/// What an agent counts, for tests, benches and logs. Thread-safe.
struct AgentCounters {
  std::atomic<int64_t> connections{0};
  std::atomic<int64_t> samples_sent{0};
  /// Sample batches sent as compact columns (the stream's coordinator takes them).
  std::atomic<int64_t> sample_batches_as_columns{0};
  std::atomic<int64_t> tasks_finished{0};
  /// Messages sent again on a new stream because their ack had not come.
  std::atomic<int64_t> messages_resent{0};
  /// Messages the coordinator refused as malformed (a bug of the agent's).
  std::atomic<int64_t> messages_rejected{0};
  /// Pump passes that held samples back because acks lagged.
  std::atomic<int64_t> ack_lag_waits{0};
  /// Passes of the pump (each may send heartbeats, samples, power, progress).
  std::atomic<int64_t> pump_passes{0};
  /// Attempts the agent stopped by itself: the coordinator was silent for a whole lease.
  std::atomic<int64_t> attempts_abandoned{0};
};

/// What every held task sends through: the agent's stream, settings and counters.
struct Outlet {
  /// Writes on the current stream; false when it is down (the message stays outstanding).
  std::function<bool(const v1::AgentMessage&)> write;
  const AgentConfig* config = nullptr;
  PowerSampler* sampler = nullptr;  // null: no power readings
  /// Sees every sample batch made (tests compare it with what was stored).
  const std::function<void(const v1::SampleBatch&)>* observer = nullptr;
  AgentCounters* counters = nullptr;
  /// The agent's clock offset to the coordinator, put in the TaskDone.
  std::function<v1::ClockSync()> clock;
  /// The current stream's Welcome said the coordinator takes sample batches
  /// as compact columns (SampleBatch.columns); until then they go as arrays.
  const std::atomic<bool>* sample_columns = nullptr;
};

struct HeldTask {
  v1::Assign assign;
  v1::Device device;
  std::unique_ptr<TaskControl> control;
  std::thread thread;
  std::atomic<bool> finished{false};
  absl::StatusOr<v1::TaskResult> result;  // written by the task thread before `finished`
  // Fenced by the coordinator, or given up after a silent lease (the attempt
  // is no longer ours): stop, send nothing more, forget it once the thread ends.
  std::atomic<bool> abandoned{false};
  std::shared_ptr<PowerTap> tap;  // null without a sampler

  /// Nothing left to deliver, or nothing wanted: the pump may forget it.
  bool Settled();
  /// The coordinator acknowledged (or refused) the TaskDone, or the sample
  /// or power batch `seq`: it leaves the outbox.
  void Settle(bool done, bool power, uint64_t seq);
  /// Sends every outstanding message again, at the start of a stream, the
  /// TaskDone last (the coordinator checks it has every batch).
  bool ResendOutstanding(const Outlet& out);
  /// One pass of the pump at `now_ns` (the agent's clock): samples in full
  /// batches or when they waited long enough, power, progress, and once the
  /// task finished its TaskDone. False when a write failed.
  bool PumpPass(const Outlet& out, int64_t now_ns);
  /// Stops the task's power readings (pump thread, or once the pump is joined).
  void ReleaseTap(PowerSampler* sampler);

 private:
  bool DrainSamples(const Outlet& out);
  bool DrainPower(const Outlet& out);
  bool SendProgress(const Outlet& out);
  bool SendDone(const Outlet& out);
  /// Builds the TaskDone once, after the last batch: its counts cover every batch made.
  v1::AgentMessage BuildDone(const Outlet& out);

  // Pump thread only.
  size_t sent_ = 0;  // records already put into batches
  uint64_t next_seq_ = 0;
  int64_t samples_sent_ = 0;
  int64_t last_progress_ns_ = 0;
  int64_t last_samples_send_ns_ = 0;
  uint64_t next_power_seq_ = 0;
  int64_t last_power_send_ns_ = 0;
  bool done_written_ = false;  // on the current stream

  absl::Mutex out_mu_;
  std::map<uint64_t, v1::AgentMessage> unacked_samples_ ABSL_GUARDED_BY(out_mu_);
  std::map<uint64_t, v1::AgentMessage> unacked_power_ ABSL_GUARDED_BY(out_mu_);
  std::optional<v1::AgentMessage> done_ ABSL_GUARDED_BY(out_mu_);  // built once the task ends
  bool done_acked_ ABSL_GUARDED_BY(out_mu_) = false;
};

}  // namespace hetbench::agent
