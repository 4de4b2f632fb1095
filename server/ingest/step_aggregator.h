#pragma once
/// Incremental aggregation of a task's step samples at ingest, so a task's
/// end costs the coordinator's loop a bounded amount whatever its sample count.
///
/// Exact while a phase holds at most kExactLimit steps (percentiles as
/// ComputeTimingStats gives them); past that the durations move into a
/// log-linear histogram whose bucket width bounds each percentile's relative
/// error by kRelativeError, and the stats say so (quantile_relative_error).
/// Count, items, mean, stddev, min, max, total and window stay exact.
/// Memory per phase: at most kExactLimit x 8 bytes, then the histogram's
/// occupied buckets (a few thousand at most for real step times).
/// Not thread-safe: the event loop owns it.

#include <cstdint>
#include <map>
#include <vector>

#include "hetbench/v1/agent.pb.h"
#include "hetbench/v1/common.pb.h"

namespace hetbench::server {

class PhaseAccumulator {
 public:
  static constexpr size_t kExactLimit = size_t{1} << 17;
  static constexpr int kSubBucketBits = 10;
  static constexpr double kRelativeError = 1.0 / (1 << kSubBucketBits);

  void Add(int64_t start_ns, int64_t duration_ns, int32_t items);
  int64_t count() const { return count_; }
  bool exact() const { return histogram_.empty(); }
  /// The phase's stats; O(kExactLimit) at most.
  v1::TimingStats Finish() const;

 private:
  static int32_t Bucket(int64_t v);
  static double BucketMid(int32_t b);
  void MoveToHistogram();

  int64_t count_ = 0, items_ = 0;
  double mean_ = 0, m2_ = 0, total_ = 0;  // Welford
  int64_t min_ = 0, max_ = 0, first_start_ = 0, last_end_ = 0;
  std::vector<int64_t> exact_;
  std::map<int32_t, int64_t> histogram_;
};

/// What the coordinator keeps of one running task attempt's samples.
struct TaskAggregate {
  int attempt = 0;
  std::map<v1::Phase, PhaseAccumulator> phases;
  int64_t batches_stored = 0;  // distinct (seq) batches stored for this attempt
  int64_t samples_stored = 0;

  /// Adds one newly stored batch.
  void Add(const v1::SampleBatch& batch);
};

}  // namespace hetbench::server
