#include "server/loop/event_loop.h"

#include <pthread.h>

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
  loop_ = std::thread([this] { Run(); });
}

void EventLoop::Stop() {
  {
    absl::MutexLock l(&mu_);
    if (!started_ || stop_) return;
    stop_ = true;
  }
  if (loop_.joinable()) loop_.join();
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

void EventLoop::Run() {
  pthread_setname_np(pthread_self(), "hb-loop");  // named in top, perf and gdb
  std::vector<Item> batch;
  std::vector<double> latencies;
  for (;;) {
    bool stopping;
    batch.clear();
    {
      absl::MutexLock l(&mu_);
      auto ready = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return !queue_.empty() || stop_; };
      mu_.AwaitWithTimeout(absl::Condition(&ready), absl::Seconds(options_.tick_seconds));
      batch.swap(queue_);
      sheddable_queued_ = 0;
      stopping = stop_;
    }
    absl::Status txn = store_->Begin();
    latencies.clear();
    for (Item& item : batch) {
      latencies.push_back(static_cast<double>(SteadyNowNs() - item.posted_ns) * 1e-9);
      item.fn();
      item.fn = nullptr;  // release captured messages now, not at the next batch
    }
    if (hooks_.end_of_batch) hooks_.end_of_batch();
    if (txn.ok()) txn = store_->Commit();
    if (!txn.ok()) {
      LogError("loop", "commit failed, reloading state from the store: ", txn.ToString());
      (void)store_->Rollback();
      if (hooks_.commit_failed) hooks_.commit_failed(txn);
    }
    std::vector<Deferred> deferred;
    deferred.swap(deferred_);
    for (auto& d : deferred) d(txn);
    if (hooks_.after_commit) hooks_.after_commit();
    metrics_->ObserveLoopBatch(latencies, batch.size());
    if (stopping) break;
  }
}

}  // namespace hetbench::server
