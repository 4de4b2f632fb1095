#pragma once
/// The system under test of a serving run, shaped as serving stacks are
/// (Triton's dynamic batcher, TorchServe's batch_size/max_batch_delay): queries
/// wait in one queue; each of `instances` workers takes up to `max_batch` of
/// them, waiting at most `max_queue_delay` past the oldest query's arrival
/// for the batch to fill, runs them as one batch and answers each. The
/// issuer (issuer.h) never waits for it.
///
/// What a batch runs is a function: a model's inference on a device
/// (serving_model.h), or a fake in tests. Threads: Issue from any thread;
/// the compute function runs on the worker threads, several at once when
/// instances > 1.

#include <cstdint>
#include <deque>
#include <functional>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "agent/serving/issuer.h"

namespace hetbench::agent {

struct BatchingOptions {
  int max_batch = 8;
  absl::Duration max_queue_delay = absl::Milliseconds(1);
  int instances = 1;
};

/// One batch as the server ran it (steady-clock ns).
struct ServedBatch {
  int size = 0;
  int instance = 0;
  int64_t started_ns = 0;
  int64_t finished_ns = 0;
};

class BatchingServer final : public ServingTarget {
 public:
  /// `compute(indices, instance)` runs one batch of query indices on worker
  /// `instance`; it returns once the batch's outputs exist (a GPU target
  /// synchronises first).
  using Compute = std::function<void(const std::vector<int64_t>& indices, int instance)>;
  BatchingServer(BatchingOptions options, Compute compute);
  /// Answers what is queued, then stops the workers.
  ~BatchingServer() override;

  void Issue(int64_t index, const std::function<void(int64_t)>& answered) override;
  /// Queues the queries under one lock: a worker sees them together.
  void IssueMany(int64_t first, int count, const std::function<void(int64_t)>& answered) override;

  /// The batches run so far, in the order they finished; a batch is in it
  /// before any of its queries is answered.
  std::vector<ServedBatch> Batches() const;
  /// The CPU time the workers have used so far, in seconds (their batches'
  /// compute included). From any thread.
  double WorkersCpuSeconds() const;

 private:
  struct Waiting {
    int64_t index;
    std::function<void(int64_t)> answered;
    int64_t arrived_ns;
  };
  void Work(int instance);

  const BatchingOptions options_;
  const Compute compute_;
  mutable absl::Mutex mu_;
  std::deque<Waiting> queue_ ABSL_GUARDED_BY(mu_);
  std::vector<ServedBatch> batches_ ABSL_GUARDED_BY(mu_);
  bool stop_ ABSL_GUARDED_BY(mu_) = false;
  std::vector<std::thread> workers_;
};

}  // namespace hetbench::agent
