#include "server/loop/event_loop.h"

#include <pthread.h>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/notification.h"
#include "common/clock.h"
#include "common/log.h"

namespace hetbench::server {

EventLoop::EventLoop(JobStore* store, Metrics* metrics, EventLoopOptions options)
    : store_(store), metrics_(metrics), options_(options) {}

EventLoop::~EventLoop() { Stop(); }

void EventLoop::Start(Hooks hooks) {
  hooks_ = std::move(hooks);
  {
    absl::MutexLock l(&mu_);
    started_ = true;
  }
  writer_ = std::thread([this] { RunWriter(); });
  loop_ = std::thread([this] { Run(); });
}

void EventLoop::Stop() {
  {
    absl::MutexLock l(&mu_);
    if (!started_ || stop_) return;
    stop_ = true;
  }
  if (loop_.joinable()) loop_.join();  // the loop waits for its last commits
  {
    absl::MutexLock l(&mu_);
    writer_stop_ = true;
  }
  if (writer_.joinable()) writer_.join();
}

bool EventLoop::Post(std::function<void()> fn, bool sheddable) {
  // Real time, not the injected clock: latency is a property of this process.
  const int64_t now = SteadyNowNs();
  absl::MutexLock l(&mu_);
  if (stop_) return false;  // shutting down: the caller's stream is being closed anyway
  if (sheddable) {
    if (sheddable_queued_ >= options_.max_queue) return false;
    ++sheddable_queued_;
  }
  queue_.push_back(Item{std::move(fn), now, sheddable});
  return true;
}

size_t EventLoop::depth() {
  absl::MutexLock l(&mu_);
  return queue_.size();
}

absl::Status EventLoop::CommitBeforeStart() {
  {
    absl::MutexLock l(&mu_);
    if (started_) return absl::FailedPreconditionError("CommitBeforeStart after Start");
  }
  const absl::Status status = CommitWrites(writes_);
  writes_.clear();
  std::vector<Deferred> deferred;
  deferred.swap(deferred_);
  for (auto& d : deferred) d(status);
  return status;
}

void EventLoop::RunSync(std::function<void()> fn) {
  // Notified after the commit of the batch that ran `fn`, so the caller sees
  // everything that batch did, sends included.
  auto done = std::make_shared<absl::Notification>();
  const bool posted = Post([this, fn = std::move(fn), done] {
    fn();
    Defer([done](const absl::Status&) { done->Notify(); });
  });
  if (posted) done->WaitForNotificationWithTimeout(absl::Seconds(30));
}

absl::Status EventLoop::CommitWrites(const std::vector<StoreWrite>& writes) {
  absl::Status status = store_->Begin();
  for (const StoreWrite& write : writes) {
    if (!status.ok()) break;
    status = write(*store_);
  }
  if (status.ok()) status = store_->Commit();
  if (!status.ok()) (void)store_->Rollback();
  return status;
}

void EventLoop::HandOff() {
  if (writes_.empty() && in_flight_ == 0) {
    // Nothing to make durable, and everything before is: no transaction.
    std::vector<Deferred> deferred;
    deferred.swap(deferred_);
    for (auto& d : deferred) d(absl::OkStatus());
    return;
  }
  Handoff h;
  h.generation = generation_;
  h.writes.swap(writes_);
  h.deferred.swap(deferred_);
  ++in_flight_;
  absl::MutexLock l(&mu_);
  to_commit_.push_back(std::move(h));
}

void EventLoop::Complete(Handoff& done) {
  --in_flight_;
  if (!done.status.ok() && done.generation == generation_) {
    // The first failure of this state: later batches handed off with it
    // fail without touching the store, so the writer is idle for the reload.
    LogError("loop", "commit failed, reloading state from the store: ", done.status.ToString());
    ++generation_;
    if (hooks_.commit_failed) hooks_.commit_failed(done.status);
  }
  for (auto& d : done.deferred) d(done.status);
  done.deferred.clear();
}

void EventLoop::RunWriter() {
  pthread_setname_np(pthread_self(), "hb-commit");
  int64_t failed_generation = -1;
  absl::Status failure;
  for (;;) {
    Handoff h;
    {
      absl::MutexLock l(&mu_);
      auto ready = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return !to_commit_.empty() || writer_stop_; };
      mu_.Await(absl::Condition(&ready));
      if (to_commit_.empty()) return;  // stopping, and everything is written
      h = std::move(to_commit_.front());
      to_commit_.pop_front();
    }
    if (h.generation <= failed_generation) {
      h.status = absl::AbortedError(absl::StrCat("an earlier batch's commit failed (", failure.message(),
                                                 "); the coordinator reloaded its state"));
    } else if (!h.writes.empty()) {
      const int64_t start = SteadyNowNs();
      h.status = CommitWrites(h.writes);
      metrics_->ObserveCommit(static_cast<double>(SteadyNowNs() - start) * 1e-9);
      if (!h.status.ok()) {
        failed_generation = h.generation;
        failure = h.status;
      }
    }
    h.writes.clear();  // release the copies on this thread
    absl::MutexLock l(&mu_);
    committed_.push_back(std::move(h));
  }
}

void EventLoop::Run() {
  pthread_setname_np(pthread_self(), "hb-loop");  // named in top, perf and gdb
  std::vector<Item> batch;
  std::vector<Handoff> done;
  std::vector<double> latencies;
  for (;;) {
    bool stopping;
    batch.clear();
    done.clear();
    {
      absl::MutexLock l(&mu_);
      auto ready = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
        return !queue_.empty() || !committed_.empty() || stop_;
      };
      mu_.AwaitWithTimeout(absl::Condition(&ready), absl::Seconds(options_.tick_seconds));
      if (in_flight_ >= options_.max_commits_in_flight) {
        // The writer is behind: wait for a commit before adding another batch.
        auto returned = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return !committed_.empty(); };
        mu_.Await(absl::Condition(&returned));
      }
      batch.swap(queue_);
      done.swap(committed_);
      sheddable_queued_ = 0;
      stopping = stop_;
    }
    for (Handoff& h : done) Complete(h);
    latencies.clear();
    for (Item& item : batch) {
      latencies.push_back(static_cast<double>(SteadyNowNs() - item.posted_ns) * 1e-9);
      item.fn();
      item.fn = nullptr;  // release captured messages now, not at the next batch
    }
    if (hooks_.end_of_batch) hooks_.end_of_batch();
    HandOff();
    if (hooks_.after_commit) hooks_.after_commit();
    metrics_->ObserveLoopBatch(latencies, batch.size());
    if (stopping) break;
  }
  // The last commits: their deferred actions (acks, replies) still run, and
  // what those defer or write in turn.
  while (in_flight_ > 0 || !writes_.empty() || !deferred_.empty()) {
    if (in_flight_ == 0) {
      HandOff();
      continue;
    }
    {
      absl::MutexLock l(&mu_);
      auto returned = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return !committed_.empty(); };
      mu_.Await(absl::Condition(&returned));
      done.clear();
      done.swap(committed_);
    }
    for (Handoff& h : done) Complete(h);
    if (hooks_.after_commit) hooks_.after_commit();
  }
}

}  // namespace hetbench::server
