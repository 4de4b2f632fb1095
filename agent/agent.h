#pragma once
/// hetbench-agent: dials out to the coordinator, holds one Connect stream,
/// runs assigned tasks (one per device at a time) and streams their samples.
///
/// Threads per connection: the reader (Run's thread) handles Assign, Cancel
/// and acks; a pump thread sends heartbeats, sample batches, progress and
/// results; one task thread per running task runs the executor, which only
/// records into its lock-free buffer.
///
/// A broken stream does not stop the work: tasks go on, their batches stay
/// outstanding until acknowledged, and the next stream's Hello lists the
/// attempts held so the coordinator re-binds them; outstanding messages are
/// then sent again (the coordinator stores each (task, attempt, seq) once).
/// Only after a whole lease without contact are the tasks stopped.

#include <grpcpp/client_context.h>
#include <grpcpp/security/credentials.h>

#include <atomic>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "agent/executors/executor.h"
#include "common/clock.h"
#include "agent/power/power_sampler.h"
#include "hetbench/v1/agent.grpc.pb.h"

namespace hetbench::agent {

struct AgentConfig {
  std::string server_address = "127.0.0.1:50051";
  std::string agent_id;  // default: hostname
  std::string hostname;
  std::map<std::string, std::string> labels;
  double initial_backoff_seconds = 0.25;
  double max_backoff_seconds = 15.0;
  double pump_interval_seconds = 0.05;        // how often the pump wakes (heartbeats, cancels, results)
  double sample_send_interval_seconds = 0.5;  // samples wait at most this long to fill a batch
  double progress_interval_seconds = 0.25;
  int max_samples_per_batch = 1000;
  /// Unacknowledged sample batches of one task at most; past it the agent
  /// stops draining until acks catch up (samples wait in the task's buffer).
  int max_unacked_sample_batches = 64;
  double power_send_interval_seconds = 1.0;
  /// Every power sensor tried at startup, available or not (sent in Hello).
  std::vector<v1::SensorInfo> sensors_tried;
  /// Device kinds looked for and not offered, with why (sent in Hello).
  std::vector<v1::AbsentDevice> absent;
  /// TLS (with this agent's client certificate for mutual TLS); null = plaintext.
  std::shared_ptr<grpc::ChannelCredentials> credentials;
  std::string token;  // bearer token of role agent; "" = none
  /// Where this agent hosts a gang's TCPStore when it runs rank 0: the
  /// address the other ranks' agents dial, and the first port (one per
  /// device, in device order). Multi-node gangs need a routable address.
  std::string rendezvous_host = "127.0.0.1";
  int rendezvous_port_base = 29500;
  /// The agent's time for its own decisions: leases (when the coordinator
  /// counts as silent, when a held attempt is abandoned), the heartbeat period
  /// and send intervals. Null: the real clock. Tests pass a SimulatedClock and move it.
  /// What is measured (sample timestamps, and the heartbeat's agent_ns that
  /// relates them to the coordinator's clock) always uses the steady clock.
  const Clock* clock = nullptr;
};

/// Whether an executor's failure may not recur on another attempt (device
/// busy, out of memory, transient I/O): the TaskDone says `retryable`.
bool IsRetryable(const absl::Status& status);

class Agent {
 public:
  /// `sampler` may be null (no power readings); it must outlive the agent.
  Agent(AgentConfig config, std::vector<v1::Device> devices, std::unique_ptr<Executor> executor,
        PowerSampler* sampler = nullptr);
  ~Agent();

  /// Connects, serves and reconnects with jittered exponential backoff until Shutdown().
  void Run();
  /// Thread-safe; Run() returns soon after. Running tasks are cancelled.
  void Shutdown();

  /// Counters for tests and logs. Thread-safe.
  int64_t connections() const { return connections_.load(); }
  int64_t samples_sent() const { return samples_sent_.load(); }
  int64_t tasks_finished() const { return tasks_finished_.load(); }
  /// Messages sent again on a new stream because their ack had not come.
  int64_t messages_resent() const { return messages_resent_.load(); }
  /// Messages the coordinator refused as malformed (a bug of the agent's).
  int64_t messages_rejected() const { return messages_rejected_.load(); }
  /// Pump passes that held samples back because acks lagged.
  int64_t ack_lag_waits() const { return ack_lag_waits_.load(); }
  /// Passes of the pump (each may send heartbeats, samples, power, progress).
  int64_t pump_passes() const { return pump_passes_.load(); }
  /// Attempts this agent stopped by itself because the coordinator was
  /// silent for a whole lease.
  int64_t attempts_abandoned() const { return attempts_abandoned_.load(); }
  /// Called on the pump thread with every batch written (tests use it to
  /// compare what was sent with what was stored).
  void set_batch_observer(std::function<void(const v1::SampleBatch&)> observer) { observer_ = std::move(observer); }

 private:
  struct RunningTask {
    v1::Assign assign;
    v1::Device device;
    std::unique_ptr<TaskControl> control;
    std::thread thread;
    std::atomic<bool> finished{false};
    absl::StatusOr<v1::TaskResult> result;  // written by the task thread before `finished`
    // Fenced by the coordinator (the attempt is no longer ours): stop, send
    // nothing more, forget it once the thread ends.
    std::atomic<bool> abandoned{false};
    // Pump thread only.
    size_t sent = 0;  // records already put into batches
    uint64_t next_seq = 0;
    int64_t samples_sent = 0;
    int64_t last_progress_ns = 0;
    int64_t last_samples_send_ns = 0;
    std::shared_ptr<PowerTap> tap;  // null without a sampler
    uint64_t next_power_seq = 0;
    int64_t last_power_send_ns = 0;
    bool done_written = false;  // on the current stream
    // Every batch and the TaskDone stay here until the coordinator acks them
    // (it acks once they are durable) and go out again on the next stream.
    absl::Mutex out_mu;
    std::map<uint64_t, v1::AgentMessage> unacked_samples ABSL_GUARDED_BY(out_mu);
    std::map<uint64_t, v1::AgentMessage> unacked_power ABSL_GUARDED_BY(out_mu);
    std::optional<v1::AgentMessage> done ABSL_GUARDED_BY(out_mu);  // built once the task ends
    bool done_acked ABSL_GUARDED_BY(out_mu) = false;

    /// Nothing left to deliver, or nothing wanted: the pump may forget it.
    bool Settled() {
      if (abandoned.load()) return finished.load();
      absl::MutexLock l(&out_mu);
      return done_acked;
    }
  };

  /// One connection's life; returns true if the coordinator welcomed us.
  bool RunConnection();
  void Pump(grpc::ClientContext* ctx);
  void HandleAssign(const v1::Assign& assign);
  /// Starts a task on `device`'s slot (a finished task there is retired).
  void StartTask(const v1::Assign& assign, const v1::Device& device) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  /// Starts assignments that waited for their device to stop a fenced attempt.
  void StartWaitingTasks();
  void HandleCancel(const v1::Cancel& cancel);
  void HandleAck(const v1::SampleAck& ack);
  void HandleRejected(const v1::Rejected& rejected);
  /// Puts what the task recorded since the last call into batches and sends
  /// them; true if all writes succeeded (unsent batches stay outstanding).
  bool DrainSamples(RunningTask& task);
  /// The same for the power readings the task's tap collected.
  bool DrainPower(RunningTask& task);
  /// Stops the task's power readings (pump thread, or once the pump is joined).
  void ReleaseTap(RunningTask& task);
  /// Sends every outstanding (unacknowledged) message again, at the start of a stream.
  bool ResendOutstanding(RunningTask& task);
  /// The task thread: idle baseline, executor, power reads at the boundaries.
  void RunTask(RunningTask* task);
  bool Write(const v1::AgentMessage& msg);
  /// Calls `fn` on every task the agent holds (slots and retired), under mu_.
  void ForEachHeld(const std::function<void(RunningTask&)>& fn);
  /// Every task the agent holds, for one pass of the pump (only the pump and
  /// the Run loop between streams retire tasks, so the pointers stay valid).
  std::vector<RunningTask*> HeldTasks();
  /// Without contact with the coordinator for a whole lease, it has given our
  /// tasks away: stop them and forget what they did not deliver.
  void AbandonIfLeaseLapsed();
  /// Joins and forgets tasks with nothing left to deliver (all: every task).
  void JoinFinishedTasks(bool all);

  /// The clock offset estimate (ClockSync) from heartbeat echoes: the one
  /// with the shortest round trip so far, the tightest bound.
  void OnHeartbeatEcho(const v1::Heartbeat& hb);
  v1::ClockSync ClockEstimate() const;
  std::atomic<bool> heartbeat_now_{false};  // set by the reader on Welcome, taken by the pump
  mutable absl::Mutex clock_mu_;
  v1::ClockSync clock_ ABSL_GUARDED_BY(clock_mu_);
  const AgentConfig config_;
  const std::vector<v1::Device> devices_;
  std::unique_ptr<Executor> executor_;
  PowerSampler* const sampler_;
  std::function<void(const v1::SampleBatch&)> observer_;

  absl::Mutex mu_;
  bool stop_ ABSL_GUARDED_BY(mu_) = false;
  grpc::ClientContext* ctx_ ABSL_GUARDED_BY(mu_) = nullptr;
  std::map<std::string, std::unique_ptr<RunningTask>> tasks_ ABSL_GUARDED_BY(mu_);  // by device id
  // Finished tasks whose device took a new task before the pump retired them.
  std::vector<std::unique_ptr<RunningTask>> retired_ ABSL_GUARDED_BY(mu_);
  // Assignments for a device still stopping a fenced attempt, by device id.
  std::map<std::string, v1::Assign> waiting_ ABSL_GUARDED_BY(mu_);

  absl::Mutex write_mu_;
  grpc::ClientReaderWriter<v1::AgentMessage, v1::CoordinatorMessage>* stream_ ABSL_GUARDED_BY(write_mu_) = nullptr;

  std::atomic<bool> connected_{false};
  const Clock* const control_clock_;         // config_.clock, or a RealClock
  std::atomic<int64_t> last_heard_ns_{0};    // last message, or the start of this stream
  std::atomic<int64_t> last_contact_ns_{0};  // last message from the coordinator on any stream
  std::atomic<double> heartbeat_seconds_{5.0};
  std::atomic<double> lease_seconds_{15.0};
  std::atomic<int64_t> connections_{0};
  std::atomic<int64_t> samples_sent_{0};
  std::atomic<int64_t> tasks_finished_{0};
  std::atomic<int64_t> messages_resent_{0};
  std::atomic<int64_t> messages_rejected_{0};
  std::atomic<int64_t> ack_lag_waits_{0};
  std::atomic<int64_t> pump_passes_{0};
  std::atomic<int64_t> attempts_abandoned_{0};
  std::mt19937_64 rng_;
};

}  // namespace hetbench::agent
