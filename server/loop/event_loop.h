#pragma once
/// The coordinator's event loop: one thread that owns live state, and a
/// writer thread that makes each batch of it durable.
///
/// Closures posted from any thread run on the loop thread in batches. What a
/// batch changed leaves the loop as row writes (`Write`, each owning copies of
/// its rows); the writer thread commits each batch's writes in one store
/// transaction (group commit), batches in the order they ran. The loop never
/// touches the store: while a batch commits (an fsync, a PostgreSQL round
/// trip), the loop runs the next ones. What must wait for durability is
/// deferred (`Defer`): acks, assignments, replies run on the loop once their
/// batch and every earlier one have committed, with the commit's status, so
/// nothing is acknowledged before it is durable. A deferred action sends what
/// its closure captured, not live state, which may already hold later,
/// uncommitted batches.
///
/// A failed commit fails every later batch already handed to the writer (they
/// are not written: their state built on the lost one); the loop runs the
/// `commit_failed` hook once, on the loop thread, when the writer has stopped
/// touching the store (the coordinator reloads its state there: the one store
/// access on the loop thread, and only after a failure), then every failed
/// batch's deferred actions with the failure.
///
/// Bounds: the queue holds at most `max_queue` closures posted with
/// `Post(fn, /*sheddable=*/true)` (client requests); past it such posts are
/// refused so the caller can answer RESOURCE_EXHAUSTED. Agent messages are
/// bounded upstream by each stream's in-flight window (see grpc_services). At
/// most `max_commits_in_flight` batches wait for the writer; past it the loop
/// waits. The delay from Post to the start of a closure is the loop latency,
/// observed in `hetbench_coordinator_loop_latency_seconds`; each commit's
/// time in `hetbench_coordinator_commit_seconds`.

#include <cstdint>
#include <deque>
#include <functional>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "server/metrics/metrics.h"
#include "server/store/job_store.h"

namespace hetbench::server {

struct EventLoopOptions {
  /// Sheddable closures queued at most; further ones are refused.
  int max_queue = 20000;
  /// The loop wakes at least this often to run `end_of_batch` (timers).
  double tick_seconds = 0.1;
  /// Batches handed to the writer and not yet committed, at most.
  int max_commits_in_flight = 4;
};

class EventLoop {
 public:
  using Deferred = std::function<void(const absl::Status& commit_status)>;
  struct Hooks {
    /// Runs on the loop after each batch's closures: timers, the scheduling
    /// pass, the rows to write (`Write`).
    std::function<void()> end_of_batch;
    /// Runs on the loop once per failed commit, before the deferred actions
    /// of the batches it failed; the writer is idle: reload from the store.
    std::function<void(const absl::Status&)> commit_failed;
    /// Runs on the loop after each batch is handed off, and after the
    /// deferred actions of the commits that came back (gauges).
    std::function<void()> after_commit;
  };

  /// `store` and `metrics` must outlive the loop. `store` is the writer's
  /// connection: nothing else may use it once the loop has started.
  EventLoop(JobStore* store, Metrics* metrics, EventLoopOptions options);
  ~EventLoop();

  void Start(Hooks hooks);
  /// Runs the last batch, waits for every commit and its deferred actions,
  /// and stops both threads. Idempotent.
  void Stop();

  /// Queues `fn`. Returns false, and drops it, when the loop is stopping or
  /// (for a sheddable closure) the queue is full. Thread-safe.
  bool Post(std::function<void()> fn, bool sheddable = false);
  /// Loop thread only (or before Start): a row write of the current batch.
  void Write(StoreWrite write) { writes_.push_back(std::move(write)); }
  /// Loop thread only (or before Start): runs `fn` after the current batch
  /// and every earlier one are committed.
  void Defer(Deferred fn) { deferred_.push_back(std::move(fn)); }
  /// Before Start only: commits what was written, on the caller's thread,
  /// and runs what was deferred (the coordinator's start-up load).
  absl::Status CommitBeforeStart();
  /// Runs `fn` on the loop; returns once its batch is committed and its
  /// deferred actions ran (tests, admin). Thread-safe; not from the loop.
  void RunSync(std::function<void()> fn);

  /// Closures waiting now. Thread-safe.
  size_t depth();
  bool OnLoopThread() const { return std::this_thread::get_id() == loop_.get_id(); }

 private:
  struct Item {
    std::function<void()> fn;
    int64_t posted_ns;
    bool sheddable;
  };
  /// A batch's writes on their way to the writer, and back with the status.
  struct Handoff {
    int64_t generation = 0;  // the loop's state generation it built on
    std::vector<StoreWrite> writes;
    std::vector<Deferred> deferred;
    absl::Status status;
  };
  void Run();
  void RunWriter();
  /// One transaction: every write, then commit (or rollback on the first failure).
  absl::Status CommitWrites(const std::vector<StoreWrite>& writes);
  /// Loop thread: hands the current batch to the writer, or runs its
  /// deferred actions at once when it wrote nothing and nothing is in flight.
  void HandOff();
  /// Loop thread: a commit came back.
  void Complete(Handoff& done);

  JobStore* const store_;
  Metrics* const metrics_;
  const EventLoopOptions options_;
  Hooks hooks_;

  absl::Mutex mu_;
  std::vector<Item> queue_ ABSL_GUARDED_BY(mu_);
  int sheddable_queued_ ABSL_GUARDED_BY(mu_) = 0;
  bool stop_ ABSL_GUARDED_BY(mu_) = false;
  bool started_ ABSL_GUARDED_BY(mu_) = false;
  std::deque<Handoff> to_commit_ ABSL_GUARDED_BY(mu_);  // the writer's queue
  std::vector<Handoff> committed_ ABSL_GUARDED_BY(mu_);  // back to the loop
  bool writer_stop_ ABSL_GUARDED_BY(mu_) = false;
  std::thread loop_;
  std::thread writer_;
  // Loop thread only (or the caller's before Start).
  std::vector<StoreWrite> writes_;
  std::vector<Deferred> deferred_;
  int in_flight_ = 0;        // handed off, not yet completed
  int64_t generation_ = 0;   // bumped by every reload after a failed commit
};

}  // namespace hetbench::server
