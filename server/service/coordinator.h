#pragma once
/// The coordinator: the event loop (server/loop) and the client API, wired to
/// the parts that own the state; every part runs on the loop's thread.
///
/// Threading: every state change runs on the loop thread. gRPC reactions do
/// the work proportional to a request's size at the edge (spec defaults and
/// validation, batch column checks, histogram counts) on their own thread,
/// then post a closure and return. The loop runs closures in batches; what a
/// batch changed goes as row writes to the loop's writer thread, which
/// commits each batch in one transaction while the loop runs the next; what
/// a batch produced is sent only after its commit. No store access on the
/// loop thread, except the reload after a failed commit (EventLoop).
///
/// Memory: only live (unfinished) jobs are held; a job that ends is evicted
/// after the commit that stored its end, and read from the store on demand.
/// Per running task the coordinator keeps an incremental aggregate of its
/// samples (server/ingest/step_aggregator.h), so a task's end is bounded work.
///
/// Parts: JobTable (job_table.h: live jobs and what a batch changed),
/// SessionTable (session_table.h: agent streams), AgentSessions
/// (agent_sessions.h: Hello, leases, resume, fencing), AgentMessages
/// (agent_messages.h: what agents send), Attempts (attempts.h: a task's
/// attempt from start to end), Watches (watches.h), Placer
/// (server/scheduler/placer.h: leases, gangs, splits, holds), Ingest
/// (server/ingest/ingest.h: the batch writer, aggregates, power readings).

#include <grpcpp/support/status.h>

#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
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
#include "server/service/agent_messages.h"
#include "server/service/agent_sessions.h"
#include "server/service/attempts.h"
#include "server/service/job_api.h"
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
  /// > 0: every this many seconds, a quick validation of the devices idle
  /// then (docs/validation.md); a device busy with a task is left alone, and
  /// none starts while the previous scheduled one runs. 0: never.
  double revalidate_every_seconds = 0;
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

  /// What clients ask: submit, get, cancel, list and watch jobs, list agents, task data.
  JobApi& api() { return api_; }
  using Submitted = JobApi::Submitted;

  // Agent streams. Every stream gets its own session id.
  uint64_t NewSessionId();
  void OnAgentMessage(uint64_t session, std::shared_ptr<AgentSink> sink, v1::AgentMessage msg);
  /// At the edge, on the stream's gRPC thread: a heartbeat of a welcomed
  /// session is recorded for the loop to merge (SessionTable::MergeEdge)
  /// and echoed at once, without posting to the loop. False for any other
  /// message, or a session not welcomed: then OnAgentMessage handles it.
  bool EdgeHeartbeat(uint64_t session, AgentSink& sink, const v1::AgentMessage& msg);
  void OnAgentGone(uint64_t session, std::string reason);

  /// Runs `fn` on the loop once what was handed in before has been handled,
  /// sample batches with the writer included (at most 10 s), and returns
  /// after its commit (tests, admin). Not from the loop.
  void RunSync(std::function<void()> fn);
  /// Jobs held in memory now (live ones). Loop thread or RunSync only.
  size_t live_jobs() const { return jobs_.size(); }

 private:
  absl::Status LoadFromStore();
  // The loop's hooks: at the end of each batch (timers, the scheduling pass,
  // the rows to write, watch events and evictions deferred to the commit);
  // after it (gauges).
  void EndOfBatch();
  /// A scheduled validation of the idle devices, when one is due (revalidate_every_seconds).
  void MaybeRevalidate();
  void AfterCommit();
  /// An evicted job: the other parts forget its tasks.
  void Forget(const v1::Job& job);
  void UpdateGauges();
  /// Places queued tasks (Placer) and starts them (Attempts).
  void Schedule();

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
  AgentSessions agents_{AgentSessions::Parts{&sessions_, &jobs_, &placer_, &attempts_, &watches_, metrics_, clock_},
                        AgentSessions::Options{options_.heartbeat_seconds, options_.lease_seconds}};
  AgentMessages messages_{AgentMessages::Parts{&sessions_, &agents_, &jobs_, &placer_, &ingest_, &attempts_, &watches_,
                                               metrics_, clock_},
                          [this](std::function<void(const absl::Status&)> fn) { loop_.Defer(std::move(fn)); }};
  JobApi api_{JobApi::Parts{&loop_, &jobs_, &sessions_, &agents_, &placer_, &watches_, metrics_, clock_}};
  std::unique_ptr<StoreReader> task_data_reader_;  // GetTaskData pages, off the loop
  std::unique_ptr<StoreReader> ended_reader_;      // ended jobs and tasks, off the loop
  int64_t last_gauges_ns_ = 0;
  bool job_gauges_dirty_ = true;    // job and task counts
  bool agent_gauges_dirty_ = true;  // agents by kind: only when agents come or go
  int64_t last_prune_ns_ = 0;
  std::optional<int64_t> last_revalidate_ns_;  // unset until the first batch
  std::string revalidation_job_;  // the scheduled validation still live, if any
  std::shared_ptr<std::atomic<bool>> pruning_ = std::make_shared<std::atomic<bool>>(false);  // one prune at a time
  bool closing_streams_ = false;
};

}  // namespace hetbench::server
