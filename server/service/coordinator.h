#pragma once
/// The coordinator's core: job lifecycle and the client API, agent sessions,
/// ingest, and the scheduling pass, all on one event loop (server/loop).
///
/// Threading: every state change runs on the loop thread. gRPC reactions do
/// the work proportional to a request's size at the edge (spec defaults and
/// validation, batch column checks, histogram counts) on their own thread,
/// then post a closure and return. The loop runs closures in batches inside
/// one store transaction, commits, and only then sends what they produced.
///
/// Memory: only live (unfinished) jobs are held; a job that ends is evicted
/// after the commit that stored its end, and read from the store on demand.
/// Per running task the coordinator keeps an incremental aggregate of its
/// samples (server/ingest/step_aggregator.h), so a task's end is bounded work.
///
/// Files: coordinator.cc (lifecycle, client API, job state, gauges),
/// agent_sessions.cc (Hello, leases, resume, fencing, agent loss),
/// ingest.cc (progress, samples, power, TaskDone, protocol errors),
/// gangs.cc (tasks holding several devices: gang ranks, split stages).
/// Parts with their own state: JobTable (job_table.h), SessionTable
/// (session_table.h), Watches (watches.h), the scheduling pass
/// (server/scheduler), the batch writer and aggregates (server/ingest).

#include <grpcpp/support/status.h>

#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "common/clock.h"
#include "hetbench/v1/agent.pb.h"
#include "hetbench/v1/coordinator.pb.h"
#include "server/ingest/batch_writer.h"
#include "server/ingest/step_aggregator.h"
#include "server/loop/event_loop.h"
#include "server/metrics/metrics.h"
#include "server/scheduler/scheduler.h"
#include "server/service/job_table.h"
#include "server/service/session_table.h"
#include "server/service/sinks.h"
#include "server/service/task_data_reader.h"
#include "server/service/watches.h"
#include "server/store/job_store.h"

namespace hetbench::server {

struct CoordinatorOptions {
  double heartbeat_seconds = 5.0;  // coordinator -> agent heartbeat period
  double lease_seconds = 15.0;     // an agent silent this long is lost
  int max_attempts = 3;            // per task, counting re-queues after agent loss and retryable failures
  int max_restarts = 10;           // coordinator restarts that may interrupt one task (not counted above)
  int max_samples_per_batch = 100000;
  /// Client requests queued on the loop at most; past it they are refused
  /// with RESOURCE_EXHAUSTED and a retry hint.
  int max_queued_requests = 20000;
  /// A job's watchers get at most one event per this many seconds (the
  /// latest state; a job's end is sent at once).
  double watch_interval_seconds = 0.1;
  /// Raw sample and power batches of jobs finished longer ago than this are
  /// deleted (aggregated results stay); 0 keeps them forever.
  double raw_retention_seconds = 0;
  /// A gang (data parallel, or a split across agents) queued this long holds
  /// the free devices it could use in each scheduling pass, so later tasks
  /// cannot keep taking them one by one; nothing is leased, and the oldest
  /// gang holds first, so two gangs cannot deadlock. < 0: never hold.
  double gang_hold_after_seconds = 60;
};

class Coordinator {
 public:
  /// `store`, `metrics` and `clock` must outlive the coordinator. `clock`
  /// drives leases, heartbeats and timestamps (tests pass a SimulatedClock).
  Coordinator(JobStore* store, Metrics* metrics, const Clock* clock, CoordinatorOptions options);
  ~Coordinator();

  /// Loads the live jobs from the store and starts the event loop. Tasks that
  /// were running when the previous coordinator stopped stay leased to their
  /// agents for one lease, to be resumed; then they are re-queued.
  absl::Status Start();
  /// Closes every agent and watch stream with UNAVAILABLE and refuses new
  /// ones; unary calls are still served. First step of a shutdown.
  void CloseStreams();
  /// Stops the loop. Call after the gRPC server has shut down. Idempotent.
  void Stop();

  // Client API. Callbacks run on the event loop after the commit. Refused
  // with RESOURCE_EXHAUSTED when the loop's queue is full.
  using JobCallback = std::function<void(absl::StatusOr<v1::Job>)>;
  struct Submitted {
    v1::Job job;
    bool existing = false;  // the request id named an earlier job
  };
  /// Fills defaults and validates on the calling thread (the edge), then
  /// posts. `request_id` makes it idempotent; a request still queued past
  /// `deadline` is dropped without creating anything.
  void SubmitJob(v1::JobSpec spec, std::string request_id, absl::Time deadline,
                 std::function<void(absl::StatusOr<Submitted>)> done);
  /// Shorthand without request id or deadline (tests).
  void SubmitJob(v1::JobSpec spec, JobCallback done);
  void GetJob(std::string job_id, JobCallback done);
  void CancelJob(std::string job_id, JobCallback done);
  void ListJobs(JobFilter filter, std::function<void(absl::StatusOr<JobPage>)> done);
  void ListAgents(std::function<void(std::vector<v1::AgentInfo>)> done);
  /// A page of one task's stored samples or power readings, read off the
  /// loop (TaskDataReader); `done` runs on the reader's thread.
  void GetTaskData(v1::GetTaskDataRequest request, std::function<void(absl::StatusOr<v1::TaskData>)> done);
  /// Sends a snapshot, then the latest state at most once per
  /// watch_interval_seconds while it changes; closes with OK once the job ends.
  /// `summary`: events carry tasks without results (JOB_VIEW_SUMMARY).
  void WatchJob(std::string job_id, bool summary, std::shared_ptr<WatchSink> sink);

  // Agent streams. Every stream gets its own session id.
  uint64_t NewSessionId();
  void OnAgentMessage(uint64_t session, std::shared_ptr<AgentSink> sink, v1::AgentMessage msg);
  void OnAgentGone(uint64_t session, std::string reason);

  /// Runs `fn` on the loop once what was handed in before has been handled,
  /// sample batches with the writer included (at most 10 s), and returns
  /// after its commit (tests, admin). Not from the loop.
  void RunSync(std::function<void()> fn);
  /// Jobs held in memory now (live ones). Loop thread or RunSync only.
  size_t live_jobs() const { return jobs_.size(); }

 private:
  /// What the edge found in an agent message before it reached the loop.
  struct Checked {
    std::string problem;  // non-empty: malformed, with the field named
    Metrics::StepCounts steps;
    BatchSummary summary;  // samples only
  };

  static absl::Status JobNotFound(const std::string& id);
  static absl::Status Busy(size_t depth);

  // ---- coordinator.cc: lifecycle, client API, job state, gauges
  absl::Status LoadFromStore();
  void EndOfBatch();
  void AfterCommit();
  void CreateJob(v1::JobSpec effective, const std::string& request_id,
                 std::function<void(absl::StatusOr<Submitted>)> done);
  void FinishTask(LiveJob& job, v1::Task& task, v1::TaskState state, const std::string& error);
  /// Puts a running attempt back in the queue, or fails it when it has no
  /// attempts left; `why` becomes its error. The caller freed its device.
  void RequeueOrFail(LiveJob& job, v1::Task& task, const std::string& why, bool restart);
  /// jobs_.Recompute at the coordinator's time.
  void RecomputeJobState(LiveJob& job) { jobs_.Recompute(job, clock_->SystemNowSeconds()); }
  /// Sends the watchers of jobs that changed what they have not seen (Watches::Flush).
  void FlushWatches(bool force);
  void UpdateGauges();
  void Schedule();

  // ---- gangs.cc: tasks holding several devices (gang ranks, split stages)
  enum class Placed { kWaiting, kStarted, kFailed };
  /// Leases `placement` to `task`, starts its next attempt and returns its Assign.
  v1::CoordinatorMessage StartAttempt(LiveJob& job, v1::Task& task, const Placement& placement);
  /// Sends `msg` (an Assign, a Cancel) to the agent's current session once the batch commits.
  void SendAfterCommit(const std::string& agent_id, v1::CoordinatorMessage msg);
  /// Frees every device `task` holds (its device and its split stages').
  void ReleaseTaskDevices(const v1::Task& task);
  /// Places the gang whose rank 0 is tasks(first): every rank or none. A
  /// gang queued past parallel.gang_timeout_seconds fails (kFailed).
  Placed PlaceGang(LiveJob& job, int first, SchedulingPass& pass, std::string* why);
  /// Places a split task: a device per stage, all on one agent, or none.
  Placed PlaceSplit(LiveJob& job, v1::Task& task, SchedulingPass& pass, std::string* why);
  /// After rank `cause` of a gang was re-queued or failed: the other ranks
  /// are fenced and follow it (re-queued with it, the gang retried as a
  /// whole; or failed).
  void BreakGang(LiveJob& job, const v1::Task& cause);
  bool PostRequest(std::function<void()> fn);

  // ---- agent_sessions.cc
  void Tick();
  void HandleHello(uint64_t session_id, Session& session, const v1::Hello& hello);
  /// What `get agents` shows of an agent: its Hello and the devices it holds.
  v1::AgentInfo DescribeAgent(const std::string& agent_id, const v1::Hello& hello);
  /// "cpu", "gpu", ... for a sensor's device on this agent; "node" for node-level sensors.
  static std::string SensorDeviceKind(const v1::Hello& hello, const std::string& device_id);
  /// Ends a session. Its agent's running tasks stay leased to it until the
  /// lease runs out (the session table's detached agents), so a reconnecting agent can resume them.
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
  /// Removes every per-agent metric series of an agent no longer connected
  /// nor waited for.
  void ForgetAgent(const std::string& agent_id);

  // ---- ingest.cc
  static Checked CheckAgentMessage(const v1::AgentMessage& m, int max_samples_per_batch);
  void HandleAgentMessage(uint64_t session_id, const std::shared_ptr<AgentSink>& sink,
                          const std::shared_ptr<const v1::AgentMessage>& m, const Checked& checked);
  void HandleProgress(Session& session, const v1::Progress& p);
  /// Hands a batch of a running attempt to the batch writer; the ack, the
  /// aggregate and the metrics follow its commit (SampleStored).
  void HandleSamples(Session& session, const std::shared_ptr<const v1::AgentMessage>& m, const Checked& checked);
  void SampleStored(const std::shared_ptr<AgentSink>& sink, const std::shared_ptr<const v1::AgentMessage>& m,
                    const Checked& checked, const absl::StatusOr<bool>& stored);
  void HandlePower(Session& session, const v1::PowerBatch& b, const Checked& checked);
  /// A TaskDone waits while batches of its attempt are with the batch
  /// writer (parked_done_), so the counts it is checked against are complete.
  void HandleDone(uint64_t session_id, Session& session, const std::shared_ptr<const v1::AgentMessage>& m,
                  const Checked& checked);
  /// Refuses a malformed message of a running attempt: tells the agent
  /// (Rejected, then Cancel{fenced}), counts it, and fails the attempt.
  void Reject(Session& session, LiveJob& job, v1::Task& task, const std::string& what, uint64_t seq,
              const std::string& reason, const std::string& metric_reason);
  /// The running attempt a message of `session` is for (named by `ack`, the
  /// answer it gets once handled), or null when the message was answered
  /// here: sent again for an attempt that has ended (acked), stale (fenced),
  /// or malformed (`what`, counted as `metric_reason`; the attempt fails).
  v1::Task* AdmitToAttempt(Session& session, const v1::CoordinatorMessage& ack, const Checked& checked,
                           const char* what, const char* metric_reason, LiveJob** job);
  /// OwnedTask for a message of `session`; a stale attempt is refused, counted
  /// and answered with Cancel (fencing).
  v1::Task* FencedTask(Session& session, const std::string& task_id, int attempt, LiveJob** job);
  /// When `task_id`'s attempt by this session's agent has ended, answers a
  /// message of it sent again with `ack` and returns true.
  bool AnswerSettled(Session& session, const std::string& task_id, int attempt, v1::CoordinatorMessage ack);
  static v1::CoordinatorMessage Ack(const std::string& task_id, int attempt, uint64_t seq, bool power);
  /// Stop attempt `attempt` of `task_id`; `fenced`: it is no longer the agent's (drop what is undelivered).
  static v1::CoordinatorMessage CancelMessage(const std::string& task_id, int attempt, const std::string& reason,
                                              bool fenced);
  /// Whether `agent_id` ran attempt `attempt` of `task_id` and it has ended
  /// (live jobs in memory, else the store).
  bool IsSettled(const std::string& agent_id, const std::string& task_id, int attempt);
  /// The task `task_id` when it is running attempt `attempt` on `agent_id`.
  v1::Task* OwnedTask(const std::string& agent_id, const std::string& task_id, int attempt, LiveJob** job);
  /// Rebuilds the aggregate of a running attempt from its stored batches
  /// (start-up only: after a restart the attempt may resume).
  absl::Status RebuildAggregate(const v1::Task& task);

  JobStore* const store_;
  Metrics* const metrics_;
  const Clock* const clock_;
  const CoordinatorOptions options_;
  EventLoop loop_;
  std::atomic<uint64_t> next_session_{1};

  // Loop-thread state.
  JobTable jobs_;  // the live jobs and what this batch changed of them
  bool schedule_needed_ = true;
  bool gangs_waiting_ = false;  // a gang is queued: passes run each second for its timeout
  int64_t last_gang_pass_ns_ = 0;
  bool breaking_gang_ = false;
  SessionTable sessions_;  // agent streams, agents' current sessions, detached agents
  DeviceLeases leases_;
  // Watch events are paced in real time: the pace people see is a property of this process.
  RealClock watch_clock_;
  Watches watches_{&watch_clock_, options_.watch_interval_seconds};
  std::map<std::string, TaskAggregate> aggregates_;  // running attempts, by task id
  std::unique_ptr<BatchWriter> writer_;
  std::unique_ptr<TaskDataReader> reader_;
  // Batches with the writer, and a TaskDone waiting for them, by "task/attempt".
  std::map<std::string, int> writes_pending_;
  struct ParkedDone {
    uint64_t session_id = 0;
    std::shared_ptr<const v1::AgentMessage> message;
    Checked checked;
  };
  std::map<std::string, ParkedDone> parked_done_;
  int64_t last_heartbeat_ns_ = 0;
  int64_t last_tick_ns_ = 0;       // clock_
  int64_t last_tick_real_ns_ = 0;  // SteadyNowNs
  int64_t last_gauges_ns_ = 0;
  bool gauges_dirty_ = true;
  int64_t last_prune_ns_ = 0;
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
