#include "agent/serving/batching_server.h"

#include <pthread.h>
#include <time.h>

#include <algorithm>
#include <utility>

#include "common/clock.h"

namespace hetbench::agent {

BatchingServer::BatchingServer(BatchingOptions options, Compute compute)
    : options_(options), compute_(std::move(compute)) {
  const int instances = std::max(1, options_.instances);
  for (int i = 0; i < instances; ++i) workers_.emplace_back([this, i] { Work(i); });
}

BatchingServer::~BatchingServer() {
  {
    absl::MutexLock l(&mu_);
    stop_ = true;
  }
  for (std::thread& w : workers_) w.join();
}

void BatchingServer::Issue(int64_t index, const std::function<void(int64_t)>& answered) {
  absl::MutexLock l(&mu_);
  queue_.push_back({index, answered, SteadyNowNs()});
}

void BatchingServer::IssueMany(int64_t first, int count, const std::function<void(int64_t)>& answered) {
  const int64_t now = SteadyNowNs();
  absl::MutexLock l(&mu_);
  for (int j = 0; j < count; ++j) queue_.push_back({first + j, answered, now});
}

std::vector<ServedBatch> BatchingServer::Batches() const {
  absl::MutexLock l(&mu_);
  return batches_;
}

double BatchingServer::WorkersCpuSeconds() const {
  double total = 0;
  for (const std::thread& w : workers_) {
    clockid_t clock;
    timespec ts{};
    if (pthread_getcpuclockid(const_cast<std::thread&>(w).native_handle(), &clock) == 0 &&
        clock_gettime(clock, &ts) == 0) {
      total += static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) * 1e-9;
    }
  }
  return total;
}

void BatchingServer::Work(int instance) {
  const size_t max_batch = static_cast<size_t>(std::max(1, options_.max_batch));
  for (;;) {
    std::vector<Waiting> batch;
    {
      absl::MutexLock l(&mu_);
      auto any = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return stop_ || !queue_.empty(); };
      mu_.Await(absl::Condition(&any));
      if (queue_.empty()) return;  // stopping, nothing left
      // Wait for a full batch, at most until the oldest query has waited max_queue_delay.
      auto full = [this, max_batch]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
        return stop_ || queue_.empty() || queue_.size() >= max_batch;
      };
      const absl::Duration left =
          options_.max_queue_delay - absl::Nanoseconds(SteadyNowNs() - queue_.front().arrived_ns);
      if (left > absl::ZeroDuration()) mu_.AwaitWithTimeout(absl::Condition(&full), left);
      if (queue_.empty()) continue;  // another instance took them
      const size_t n = std::min(max_batch, queue_.size());
      for (size_t i = 0; i < n; ++i) {
        batch.push_back(std::move(queue_.front()));
        queue_.pop_front();
      }
    }
    std::vector<int64_t> indices;
    indices.reserve(batch.size());
    for (const Waiting& w : batch) indices.push_back(w.index);
    ServedBatch served{static_cast<int>(batch.size()), instance, SteadyNowNs(), 0};
    compute_(indices, instance);
    served.finished_ns = SteadyNowNs();
    {
      // Recorded before its answers: once every query is answered, Batches() holds every batch.
      absl::MutexLock l(&mu_);
      batches_.push_back(served);
    }
    for (const Waiting& w : batch) w.answered(w.index);
  }
}

}  // namespace hetbench::agent
