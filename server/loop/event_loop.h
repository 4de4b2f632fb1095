#pragma once
/// The coordinator's event loop: one thread that owns live state.
///
/// Closures posted from any thread run on the loop thread in batches. Each
/// batch runs inside one store transaction (group commit): the owner's
/// `end_of_batch` hook writes what the batch changed, the loop commits, and
/// only then runs the batch's deferred actions (acks, assignments, replies)
/// with the commit's status, so nothing is acknowledged before it is durable.
///
/// Bounds: the queue holds at most `max_queue` closures posted with
/// `Post(fn, /*sheddable=*/true)` (client requests); past it such posts are
/// refused so the caller can answer RESOURCE_EXHAUSTED. Agent messages are
/// bounded upstream by each stream's in-flight window (see grpc_services).
/// The delay from Post to the start of a closure is the loop latency,
/// observed in `hetbench_coordinator_loop_latency_seconds`.

#include <cstdint>
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
};

class EventLoop {
 public:
  using Deferred = std::function<void(const absl::Status& commit_status)>;
  struct Hooks {
    /// Runs on the loop after each batch's closures, inside its transaction:
    /// timers, the scheduling pass, writing what changed.
    std::function<void()> end_of_batch;
    /// Runs on the loop when a commit failed, after the rollback: reload.
    std::function<void(const absl::Status&)> commit_failed;
    /// Runs on the loop after the deferred actions of a batch (gauges, watch events).
    std::function<void()> after_commit;
  };

  /// `store` and `metrics` must outlive the loop.
  EventLoop(JobStore* store, Metrics* metrics, EventLoopOptions options);
  ~EventLoop();

  void Start(Hooks hooks);
  /// Runs the last batch and stops the thread. Idempotent.
  void Stop();

  /// Queues `fn`. Returns false, and drops it, when the loop is stopping or
  /// (for a sheddable closure) the queue is full. Thread-safe.
  bool Post(std::function<void()> fn, bool sheddable = false);
  /// Loop thread only: runs `fn` after the current batch commits.
  void Defer(Deferred fn) { deferred_.push_back(std::move(fn)); }
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
  void Run();

  JobStore* const store_;
  Metrics* const metrics_;
  const EventLoopOptions options_;
  Hooks hooks_;

  absl::Mutex mu_;
  std::vector<Item> queue_ ABSL_GUARDED_BY(mu_);
  int sheddable_queued_ ABSL_GUARDED_BY(mu_) = 0;
  bool stop_ ABSL_GUARDED_BY(mu_) = false;
  bool started_ ABSL_GUARDED_BY(mu_) = false;
  std::thread loop_;
  std::vector<Deferred> deferred_;  // loop thread only
};

}  // namespace hetbench::server
