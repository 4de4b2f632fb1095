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
/// buckets up to the longest step (12k counters for 1 ms steps, 55k at most).
/// Not thread-safe: the event loop owns it.

#include <algorithm>
#include <cstdint>
#include <map>
#include <vector>

#include "hetbench/v1/agent.pb.h"
#include "hetbench/v1/common.pb.h"

namespace hetbench::server {

/// One batch's figures from a single pass over its columns. Made at the edge
/// (the stream's thread) with the batch's checks, so the loop merges them in
/// O(1) and touches the durations only to keep them (exact or histogram).
struct BatchSummary {
  int n = 0;
  int64_t min = 0, max = 0, first_start = 0, last_end = 0;
  int64_t items = 0, min_items = 0;
  double sum = 0, m2 = 0;  // sum of durations; squared deviations from their mean
};
/// A BatchSummary made step by step, in the pass that reads the steps (the
/// edge decodes a batch's compact columns and summarizes them at once). Sums
/// about the first duration (exact in int64), so the batch's M2 needs no
/// second pass and loses no precision to a large mean.
class BatchSummarizer {
 public:
  void Add(int64_t start_ns, int64_t duration_ns, int32_t items) {
    if (n_ == 0) {
      pivot_ = lo_ = hi_ = duration_ns;
      first_ = start_ns;
      last_ = start_ns + duration_ns;
      item_min_ = items;
    }
    ++n_;
    lo_ = std::min(lo_, duration_ns);
    hi_ = std::max(hi_, duration_ns);
    first_ = std::min(first_, start_ns);
    last_ = std::max(last_, start_ns + duration_ns);
    item_sum_ += items;
    item_min_ = std::min<int64_t>(item_min_, items);
    const int64_t e = duration_ns - pivot_;
    shifted_ += e;
    // Squares in integers while they stay far from overflow (a step within
    // ~18 minutes of the batch's first: every real one): no chain of
    // floating-point adds, one a step, and exact.
    if (e > -kExactSquareLimit && e < kExactSquareLimit) {
      shifted_sq_exact_ += static_cast<unsigned __int128>(static_cast<__int128>(e) * e);
    } else {
      shifted_sq_ += static_cast<double>(e) * static_cast<double>(e);
    }
  }
  BatchSummary Finish() const {
    BatchSummary b;
    if (n_ == 0) return b;
    b.n = n_;
    b.min = lo_;
    b.max = hi_;
    b.first_start = first_;
    b.last_end = last_;
    b.items = item_sum_;
    b.min_items = item_min_;
    const double s1 = static_cast<double>(shifted_);
    b.sum = static_cast<double>(pivot_) * n_ + s1;
    const double sq = static_cast<double>(shifted_sq_exact_) + shifted_sq_;
    b.m2 = std::max(0.0, sq - s1 * s1 / n_);
    return b;
  }

 private:
  int n_ = 0;
  int64_t pivot_ = 0, lo_ = 0, hi_ = 0, first_ = 0, last_ = 0, item_sum_ = 0, item_min_ = 0;
  int64_t shifted_ = 0;  // sum of (d - pivot): exact
  // Below 2^40 a square is below 2^80: 2^47 of them fit the 128-bit sum.
  static constexpr int64_t kExactSquareLimit = int64_t{1} << 40;
  unsigned __int128 shifted_sq_exact_ = 0;  // sum of (d - pivot)^2 for |d - pivot| < 2^40
  double shifted_sq_ = 0;                   // ... and for the rest
};

/// The summary of n steps held as arrays (a BatchSummarizer over them).
BatchSummary SummarizeBatch(const int64_t* start_ns, const int64_t* duration_ns, const int32_t* items, int n);

class PhaseAccumulator {
 public:
  static constexpr size_t kExactLimit = size_t{1} << 17;
  static constexpr int kSubBucketBits = 10;
  static constexpr double kRelativeError = 1.0 / (1 << kSubBucketBits);
  /// A serving phase stays exact to the most queries a spec may ask for
  /// (ServingLimits::kMaxQueries): its percentiles are nearest-rank of every
  /// latency, never a histogram's (8 MB at most per task).
  static constexpr size_t kServeExactLimit = size_t{1} << 20;

  /// Adds `n` steps (parallel columns).
  void Add(const int64_t* start_ns, const int64_t* duration_ns, const int32_t* items, int n);
  /// The same, with the batch already summarized (`summary.n` durations).
  void Add(const BatchSummary& summary, const int64_t* duration_ns);
  int64_t count() const { return count_; }
  bool exact() const { return histogram_.empty(); }
  /// The phase's stats; O(kExactLimit) at most.
  v1::TimingStats Finish() const;
  /// Keeps up to `limit` durations exactly (before the first Add).
  void set_exact_limit(size_t limit) { exact_limit_ = limit; }
  /// Every duration, ascending; empty once past the exact limit.
  std::vector<int64_t> SortedExact() const;
  /// Every duration in the order the batches came (the steps' run order);
  /// empty once past the exact limit.
  const std::vector<int64_t>& InOrder() const { return exact_; }

 private:
  static int32_t Bucket(int64_t v);
  static double BucketMid(int32_t b);
  void Count(int64_t v);
  void MoveToHistogram();

  size_t exact_limit_ = kExactLimit;
  int64_t count_ = 0, items_ = 0;
  double mean_ = 0, m2_ = 0, total_ = 0;  // Welford
  int64_t min_ = 0, max_ = 0, first_start_ = 0, last_end_ = 0;
  std::vector<int64_t> exact_;
  std::vector<int64_t> histogram_;  // counts by Bucket(), grown to the largest seen
};

/// What the coordinator keeps of one running task attempt's samples.
struct TaskAggregate {
  int attempt = 0;
  std::map<v1::Phase, PhaseAccumulator> phases;
  int64_t batches_stored = 0;  // distinct (seq) batches stored for this attempt
  int64_t samples_stored = 0;

  /// Adds one newly stored batch.
  void Add(const v1::SampleBatch& batch);
  /// The same, summarized by SummarizeBatch at the edge.
  void Add(const v1::SampleBatch& batch, const BatchSummary& summary);
};

}  // namespace hetbench::server
