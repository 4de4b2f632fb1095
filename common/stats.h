#pragma once
/// Order statistics over per-step durations.

#include <cstdint>
#include <vector>

#include "hetbench/v1/common.pb.h"

namespace hetbench {

/// Linear-interpolation percentile (numpy's default, "type 7") of sorted
/// values; q in [0, 1]. Returns 0 for an empty input.
double PercentileOfSorted(const std::vector<double>& sorted, double q);
/// The median of `values` (the mean of the two middle ones for an even
/// count; 0 for none), reordering them in place instead of sorting a copy.
double MedianInPlace(std::vector<double>& values);
/// The mean of `values` without the lowest and the highest
/// floor(n x trim) of them (trim in [0, 0.5); 0 for none), sorting in place.
double TrimmedMeanInPlace(std::vector<double>& values, double trim);

/// One measured step: when it started (relative to the task start), how long
/// it took and how many samples it processed.
struct StepSample {
  int64_t start_ns = 0;
  int64_t duration_ns = 0;
  int32_t items = 0;
};

/// Aggregates steps into count, mean, stddev (sample, n-1), min/max,
/// p25/p50/p75/p90/p99, IQR, samples/s (items over total step time) and the
/// wall window from the first start to the last end.
v1::TimingStats ComputeTimingStats(const std::vector<StepSample>& steps);

/// P(T <= t) for Student's t with `df` > 0 degrees of freedom (df need not
/// be whole: Welch's), from the regularized incomplete beta function.
double StudentTCdf(double t, double df);
/// The t with StudentTCdf(t, df) = p, p in (0, 1), by bisection.
double StudentTQuantile(double p, double df);

}  // namespace hetbench
