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
/// ingest.cc (progress, samples, power, TaskDone, protocol errors).
/// Parts: JobTable (job_table.h), SessionTable (session_table.h), Watches
/// (watches.h), Attempts (attempts.h: a task's attempt from start to end),
/// Placer (server/scheduler/placer.h: leases, gangs, splits, holds), Ingest
/// (server/ingest/ingest.h: the batch writer, aggregates, power readings).

#include <grpcpp/support/status.h>

#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "common/clock.h"
#include "hetbench/v1/agent.pb.h"
#include "hetbench/v1/coordinator.pb.h"
#include "server/ingest/ingest.h"
#include "server/ingest/step_aggregator.h"
#include "server/loop/event_loop.h"
#include "server/metrics/metrics.h"
#include "server/scheduler/placer.h"
#include "server/service/attempts.h"
#include "server/service/job_table.h"
#include "server/service/session_table.h"
#include "server/service/sinks.h"
#include "server/service/watches.h"
#include "server/store/job_store.h"
#include "server/store/store_reader.h"

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
  /// loop (a StoreReader); `done` runs on the reader's thread.
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
  /// An ended (or unknown: NOT_FOUND) job from the store; on a StoreReader's thread.
  static absl::StatusOr<v1::Job> StoredJob(JobStore& store, const std::string& job_id);
  static absl::Status Busy(size_t depth);

  // ---- coordinator.cc: lifecycle, client API, job state, gauges
  absl::Status LoadFromStore();
  void EndOfBatch();
  void AfterCommit();
  void CreateJob(v1::JobSpec effective, const std::string& request_id,
                 std::function<void(absl::StatusOr<Submitted>)> done);
  /// Sends the watchers of jobs that changed what they have not seen (Watches::Flush).
  void FlushWatches(bool force);
  void UpdateGauges();
  void Schedule();

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
                      const std::vector<std::string>& keep = {});
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
                    const Checked& checked, const absl::StatusOr<bool>& stored, bool counted);
  /// Hands a power batch to the batch writer; the ack and the metrics follow its commit.
  void HandlePower(Session& session, const std::shared_ptr<const v1::AgentMessage>& m, const Checked& checked);
  /// A TaskDone waits while batches of its attempt are with the batch
  /// writer (Ingest::AfterWrites), so the counts it is checked against are complete.
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
  /// Answers a message sent again for an attempt of this session's agent
  /// that has ended, with `ack`, once the batch commits.
  void AnswerSettled(Session& session, v1::CoordinatorMessage ack);
  /// Whether `agent_id` ran attempt `attempt` of `task_id` and it has ended,
  /// as far as memory knows: kAskStore when its job has left memory.
  enum class Settled { kYes, kNo, kAskStore };
  Settled SettledInMemory(const std::string& agent_id, const std::string& task_id, int attempt);
  /// For a message of an attempt whose job has left memory: reads the task
  /// off the loop, then sends `if_settled` (when given) if this agent's
  /// attempt ended, else a fenced Cancel (counted as stale).
  void AnswerFromStore(std::shared_ptr<AgentSink> sink, const std::string& agent_id, const std::string& task_id,
                       int attempt, std::optional<v1::CoordinatorMessage> if_settled);
  /// The task `task_id` when it is running attempt `attempt` on `agent_id`.
  v1::Task* OwnedTask(const std::string& agent_id, const std::string& task_id, int attempt, LiveJob** job);
  /// Rebuilds what Ingest holds of a running attempt from its stored batches
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
  Placer placer_{PlacerOptions{options_.gang_hold_after_seconds}};  // leases; when a pass is due; where tasks go
  SessionTable sessions_;  // agent streams, agents' current sessions, detached agents
  // Watch events are paced in real time: the pace people see is a property of this process.
  RealClock watch_clock_;
  Watches watches_{&watch_clock_, options_.watch_interval_seconds};
  Ingest ingest_;  // the batch writer, running attempts' aggregates and readings
  Attempts attempts_{Attempts::Parts{&jobs_, &sessions_, &placer_, &ingest_, &watches_, metrics_, clock_},
                     Attempts::Limits{options_.max_attempts, options_.max_restarts},
                     [this](std::function<void(const absl::Status&)> fn) { loop_.Defer(std::move(fn)); }};
  std::unique_ptr<StoreReader> task_data_reader_;  // GetTaskData pages, off the loop
  std::unique_ptr<StoreReader> ended_reader_;      // ended jobs and tasks, off the loop
  int64_t last_heartbeat_ns_ = 0;
  int64_t last_tick_ns_ = 0;       // clock_
  int64_t last_tick_real_ns_ = 0;  // SteadyNowNs
  int64_t last_gauges_ns_ = 0;
  bool gauges_dirty_ = true;
  int64_t last_prune_ns_ = 0;
  bool closing_streams_ = false;
};

}  // namespace hetbench::server
