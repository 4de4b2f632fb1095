#pragma once
/// The statistics of a serving benchmark, as MLPerf LoadGen defines them:
/// a seeded Poisson arrival schedule made before the run, nearest-rank
/// latency percentiles, exact percentiles of several load generators'
/// latencies merged (never averaged, never interpolated), and early
/// stopping: how many queries a run needs before its reported percentile
/// holds at 99% confidence.
///
/// Latency is measured from each query's scheduled time, not from when it
/// was issued, so a stalled issuer or server shows in every query scheduled
/// during the stall (no coordinated omission); the delay between schedule
/// and issue is kept per query beside it.

#include <cstdint>
#include <vector>

namespace hetbench {

/// Arrival times (ns from the run's start, increasing) of a Poisson process
/// at `qps` queries per second, for `duration_ns` or at most `max_queries`
/// queries, whichever ends first. The gaps are exponential, drawn by
/// inversion from a 64-bit Mersenne Twister seeded with `seed` (53-bit
/// uniforms): the same seed gives the same schedule on every machine.
/// Requires qps > 0 and finite.
std::vector<int64_t> PoissonSchedule(uint64_t seed, double qps, int64_t duration_ns, int64_t max_queries);

/// The nearest-rank percentile of ascending `sorted` values: the value of
/// rank ceil(percentile / 100 * n) (1-based); percentile in (0, 100].
/// 0 for no values.
int64_t NearestRank(const std::vector<int64_t>& sorted, double percentile);

/// Several load generators' latencies as one ascending list: the exact
/// union, from which NearestRank gives the fleet's percentiles.
std::vector<int64_t> MergeSorted(const std::vector<std::vector<int64_t>>& sorted_parts);

/// P(X <= k) for X ~ Binomial(n, q), summed in log space (stable for n in
/// the millions).
double BinomialCdf(int64_t k, int64_t n, double q);

/// Early stopping for the `percentile` (e.g. 99) at `confidence` (0.99),
/// LoadGen's rule: with n queries of which t were over the latency bound,
/// the percentile is within the bound when P(X <= t + 1) <= 1 - confidence
/// for X ~ Binomial(n, 1 - percentile / 100). With no query over the bound
/// that takes 64 queries for p90 and 662 for p99, as LoadGen says.
struct EarlyStopping {
  bool met = false;
  /// Queries needed for the count over the bound seen so far (t).
  int64_t min_queries = 0;
  /// The most queries over the bound n queries may have and still meet it;
  /// -1 when even none would not do. LoadGen's "would discard t highest
  /// latency queries".
  int64_t tolerable_over = -1;
};
EarlyStopping EarlyStop(int64_t queries, int64_t over_bound, double percentile, double confidence = 0.99);

/// The early-stopping estimate of the `percentile` of ascending `sorted`
/// latencies: the latency just below the EarlyStop(n, ...).tolerable_over
/// highest ones (0 when there are too few queries for any estimate).
int64_t EarlyStoppingEstimate(const std::vector<int64_t>& sorted, double percentile, double confidence = 0.99);

}  // namespace hetbench
