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
#include "agent/agent_config.h"
#include "agent/clock_offset.h"
#include "agent/executors/executor.h"
#include "agent/held_task.h"
#include "agent/power/power_sampler.h"
#include "common/clock.h"
#include "hetbench/v1/agent.grpc.pb.h"

namespace hetbench::agent {

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

  /// What the agent counted so far (tests, benches, logs). Thread-safe.
  const AgentCounters& counters() const { return counters_; }
  /// Called on the pump thread with every batch written (tests use it to
  /// compare what was sent with what was stored).
  void set_batch_observer(std::function<void(const v1::SampleBatch&)> observer) { observer_ = std::move(observer); }

 private:
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
  /// The task thread: idle baseline, executor, power reads at the boundaries.
  void RunTask(HeldTask* task);
  bool Write(const v1::AgentMessage& msg);
  /// Calls `fn` on every task the agent holds (slots and retired), under mu_.
  void ForEachHeld(const std::function<void(HeldTask&)>& fn);
  /// Every task the agent holds, for one pass of the pump (only the pump and
  /// the Run loop between streams retire tasks, so the pointers stay valid).
  std::vector<HeldTask*> HeldTasks();
  /// Without contact with the coordinator for a whole lease, it has given our
  /// tasks away: stop them and forget what they did not deliver.
  void AbandonIfLeaseLapsed();
  /// Joins and forgets tasks with nothing left to deliver (all: every task).
  void JoinFinishedTasks(bool all);

  /// What every held task sends through (built once, used by the pump).
  Outlet MakeOutlet();

  std::atomic<bool> heartbeat_now_{false};  // set by the reader on Welcome, taken by the pump
  ClockOffset clock_offset_;
  const AgentConfig config_;
  const std::vector<v1::Device> devices_;
  std::unique_ptr<Executor> executor_;
  PowerSampler* const sampler_;
  std::function<void(const v1::SampleBatch&)> observer_;

  absl::Mutex mu_;
  bool stop_ ABSL_GUARDED_BY(mu_) = false;
  grpc::ClientContext* ctx_ ABSL_GUARDED_BY(mu_) = nullptr;
  std::map<std::string, std::unique_ptr<HeldTask>> tasks_ ABSL_GUARDED_BY(mu_);  // by device id
  // Finished tasks whose device took a new task before the pump retired them.
  std::vector<std::unique_ptr<HeldTask>> retired_ ABSL_GUARDED_BY(mu_);
  // Assignments for a device still stopping a fenced attempt, by device id.
  std::map<std::string, v1::Assign> waiting_ ABSL_GUARDED_BY(mu_);

  absl::Mutex write_mu_;
  grpc::ClientReaderWriter<v1::AgentMessage, v1::CoordinatorMessage>* stream_ ABSL_GUARDED_BY(write_mu_) = nullptr;

  std::atomic<bool> connected_{false};
  std::atomic<bool> sample_columns_{false};  // this stream's Welcome: the coordinator takes SampleBatch.columns
  const Clock* const control_clock_;         // config_.clock, or a RealClock
  std::atomic<int64_t> last_heard_ns_{0};    // last message, or the start of this stream
  std::atomic<int64_t> last_contact_ns_{0};  // last message from the coordinator on any stream
  std::atomic<double> heartbeat_seconds_{5.0};
  std::atomic<double> lease_seconds_{15.0};
  AgentCounters counters_;
  std::mt19937_64 rng_;
};

}  // namespace hetbench::agent
