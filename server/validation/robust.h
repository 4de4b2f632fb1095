#pragma once
/// The robust statistics of the validation verdicts (server/validation/
/// judge.h): the median, a spread that never reaches 0, and a
/// distribution-free interval for the median. Pure functions.

#include <vector>

namespace hetbench::server {

/// The median of `values` (the mean of the middle two for an even count); 0 when empty.
double Median(std::vector<double> values);

/// 1.4826 x the median absolute deviation from `median` (the normal
/// distribution's sigma for normal data), at least floor_share x |median|:
/// identical devices never give a spread of 0.
double RobustSpread(const std::vector<double>& values, double median, double floor_share);

/// A distribution-free interval for the median of `sorted` (ascending): the
/// order statistics x_(j) and x_(n+1-j) with the largest j whose binomial
/// coverage is at least `confidence`; with too few values for it, the
/// smallest and largest, with the coverage they have.
struct MedianInterval {
  double low = 0;
  double high = 0;
  double coverage = 0;
};
MedianInterval MedianCi(const std::vector<double>& sorted, double confidence);

}  // namespace hetbench::server
