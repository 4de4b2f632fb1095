#pragma once
/// The coordinator's core: job lifecycle, scheduling, agent sessions, sample
/// ingestion and aggregation.
///
/// Threading: every state change runs on one event-loop thread. gRPC reactions
/// only post closures to it and return. The loop takes all pending closures,
/// runs them inside one store transaction, commits, and only then sends what
/// they produced (acks, assignments, replies): nothing is acknowledged before
/// it is durable.

#include <grpcpp/support/status.h>

#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "common/clock.h"
#include "hetbench/v1/agent.pb.h"
#include "hetbench/v1/coordinator.pb.h"
#include "server/metrics/metrics.h"
#include "server/scheduler/scheduler.h"
#include "server/store/job_store.h"

namespace hetbench::server {

/// The write side of a server stream. Thread-safe.
template <typename T>
class MessageSink {
 public:
  virtual ~MessageSink() = default;
  /// Queues a message; dropped once the stream is closed or gone.
  virtual void Send(T msg) = 0;
  /// Ends the stream with `status` once queued messages are written. Idempotent.
  virtual void Close(const grpc::Status& status) = 0;
};

using AgentSink = MessageSink<v1::CoordinatorMessage>;
using WatchSink = MessageSink<v1::JobEvent>;

struct CoordinatorOptions {
  double heartbeat_seconds = 5.0;  // coordinator -> agent heartbeat period
  double lease_seconds = 15.0;     // an agent silent this long is lost
  int max_attempts = 3;            // per task, counting re-queues after agent loss
  int max_restarts = 10;           // coordinator restarts that may interrupt one task (not counted above)
  int max_samples_per_batch = 100000;
};

class Coordinator {
 public:
  /// `store`, `metrics` and `clock` must outlive the coordinator.
  Coordinator(JobStore* store, Metrics* metrics, const Clock* clock, CoordinatorOptions options);
  ~Coordinator();

  /// Loads the store and starts the event loop. Tasks that were running when
  /// the previous coordinator stopped stay leased to their agents for one
  /// lease, to be resumed; then they are re-queued.
  absl::Status Start();
  /// Closes every agent and watch stream with UNAVAILABLE and refuses new
  /// ones; unary calls are still served. First step of a shutdown.
  void CloseStreams();
  /// Stops the loop. Call after the gRPC server has shut down. Idempotent.
  void Stop();

  // Client API. Callbacks run on the event loop after the commit.
  using JobCallback = std::function<void(absl::StatusOr<v1::Job>)>;
  void SubmitJob(v1::JobSpec spec, JobCallback done);
  void GetJob(std::string job_id, JobCallback done);
  void CancelJob(std::string job_id, JobCallback done);
  void ListJobs(int limit, std::function<void(std::vector<v1::Job>)> done);
  void ListAgents(std::function<void(std::vector<v1::AgentInfo>)> done);
  /// Sends a snapshot, then an event per change; closes with OK once the job ends.
  void WatchJob(std::string job_id, std::shared_ptr<WatchSink> sink);

  // Agent streams. Every stream gets its own session id.
  uint64_t NewSessionId();
  void OnAgentMessage(uint64_t session, std::shared_ptr<AgentSink> sink, v1::AgentMessage msg);
  void OnAgentGone(uint64_t session, std::string reason);

  /// Runs `fn` on the loop; returns once its batch is committed and its
  /// messages are sent (tests, admin).
  void RunSync(std::function<void()> fn);

 private:
  struct Session {
    std::shared_ptr<AgentSink> sink;
    bool has_hello = false;
    v1::Hello hello;
    int64_t last_seen_ns = 0;
    double connected_unix = 0;
    double last_seen_unix = 0;
  };
  using Deferred = std::function<void(const absl::Status& commit_status)>;

  void Post(std::function<void()> fn);
  void Loop();
  void Defer(Deferred fn) { deferred_.push_back(std::move(fn)); }

  // All below run on the loop thread only.
  absl::Status LoadFromStore();
  void Tick();
  void Schedule();
  void HandleHello(uint64_t session_id, Session& session, const v1::Hello& hello);
  void HandleProgress(Session& session, const v1::Progress& p);
  void HandleSamples(Session& session, const v1::SampleBatch& b);
  void HandleDone(Session& session, const v1::TaskDone& d);
  void HandlePower(Session& session, const v1::PowerBatch& b);
  /// OwnedTask for a message of `session`; a stale attempt is refused, counted
  /// and answered with Cancel (fencing).
  v1::Task* FencedTask(Session& session, const std::string& task_id, int attempt, v1::Job** job);
  /// When `task_id`'s attempt by this session's agent has ended, answers a
  /// message of it sent again with `ack` and returns true.
  bool AnswerSettled(Session& session, const std::string& task_id, int attempt, v1::CoordinatorMessage ack);
  static v1::CoordinatorMessage Ack(const std::string& task_id, int attempt, uint64_t seq, bool power);
  /// "cpu", "gpu", ... for a sensor's device on this agent; "node" for node-level sensors.
  static std::string SensorDeviceKind(const v1::Hello& hello, const std::string& device_id);
  /// What `get agents` shows of an agent: its Hello and the devices it holds.
  v1::AgentInfo DescribeAgent(const std::string& agent_id, const v1::Hello& hello);
  /// Ends a session. Its agent's running tasks stay leased to it until the
  /// lease runs out (see detached_), so a reconnecting agent can resume them.
  void DropSession(uint64_t session_id, const std::string& reason);
  /// Re-binds the attempts a reconnecting agent lists to its new session;
  /// re-queues its leased attempts it does not list; fences the rest.
  void ResumeTasks(Session& session, const v1::Hello& hello);
  /// Frees every device leased to `agent_id` except for the tasks in `keep`,
  /// and loses their attempts (LoseTask).
  void LoseAgentTasks(const std::string& agent_id, const std::string& detail, bool restart,
                      const std::set<std::string>& keep = {});
  /// Re-queues (or fails, or cancels) the running attempt `task_id` whose
  /// agent is gone; the caller has freed its device. The error reads
  /// "attempt N lost: agent A <detail>". `restart`: lost to a coordinator
  /// restart (counted in Task.restarts, not in attempts).
  void LoseTask(const std::string& task_id, const std::string& detail, bool restart);
  /// The task `task_id` when `agent_id` ran attempt `attempt` of it and it has
  /// ended: a message of it sent again is answered, not stored.
  v1::Task* SettledTask(const std::string& agent_id, const std::string& task_id, int attempt);
  /// The task `task_id` when it is running attempt `attempt` on `agent_id`.
  v1::Task* OwnedTask(const std::string& agent_id, const std::string& task_id, int attempt, v1::Job** job);
  void FinishTask(v1::Job& job, v1::Task& task, v1::TaskState state, const std::string& error);
  void RecomputeJobState(v1::Job& job);
  void Persist(const v1::Job& job);
  void Notify(const v1::Job& job, const std::string& message);
  void UpdateGauges();
  v1::Job* FindJob(const std::string& job_id);

  JobStore* const store_;
  Metrics* const metrics_;
  const Clock* const clock_;
  const CoordinatorOptions options_;

  absl::Mutex mu_;
  std::vector<std::function<void()>> queue_ ABSL_GUARDED_BY(mu_);
  bool stop_ ABSL_GUARDED_BY(mu_) = false;
  bool started_ ABSL_GUARDED_BY(mu_) = false;
  std::atomic<uint64_t> next_session_{1};
  std::thread loop_;

  // Loop-thread state.
  std::map<std::string, v1::Job> jobs_;
  std::vector<std::string> job_order_;
  std::map<std::string, std::pair<std::string, int>> task_index_;  // task id -> (job id, index)
  int64_t next_job_number_ = 1;
  std::map<uint64_t, Session> sessions_;
  std::map<std::string, uint64_t> agent_sessions_;  // agent id -> session
  // Agents whose stream ended while they held tasks: the tasks stay theirs
  // until `deadline_ns` (last message + lease), then are re-queued.
  struct Detached {
    int64_t deadline_ns = 0;
    std::string reason;
    bool restart = false;  // detached by a coordinator restart, not a broken stream
    v1::Hello hello;       // what the agent offered; empty after a restart
  };
  std::map<std::string, Detached> detached_;  // by agent id
  DeviceLeases leases_;
  std::multimap<std::string, std::shared_ptr<WatchSink>> watchers_;
  std::vector<Deferred> deferred_;
  std::vector<std::string> dirty_jobs_;
  int64_t last_heartbeat_ns_ = 0;
  bool gauges_dirty_ = true;
  bool closing_streams_ = false;
  struct LastReading {
    int64_t t_ns = 0;
    double watts = 0, joules = 0;
  };
  // Previous reading per sensor of a task's current attempt, to turn readings
  // into metrics deltas. A new attempt starts from scratch (its clock restarts).
  struct AttemptReadings {
    int attempt = 0;
    std::map<std::string, LastReading> by_sensor;
  };
  std::map<std::string, AttemptReadings> last_power_;  // by task id
};

}  // namespace hetbench::server
