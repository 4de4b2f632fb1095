#include "server/validation/robust.h"

#include <algorithm>
#include <cmath>

#include "common/stats.h"

namespace hetbench::server {

double Median(std::vector<double> values) { return MedianInPlace(values); }

double RobustSpread(const std::vector<double>& values, double median, double floor_share) {
  std::vector<double> dev;
  dev.reserve(values.size());
  for (double x : values) dev.push_back(std::fabs(x - median));
  return std::max(1.4826 * Median(std::move(dev)), floor_share * std::fabs(median));
}

MedianInterval MedianCi(const std::vector<double>& sorted, double confidence) {
  MedianInterval out;
  const int n = static_cast<int>(sorted.size());
  if (n == 0) return out;
  // P(x_(j) <= median < x_(n+1-j)) = 1 - 2 P(Binomial(n, 1/2) <= j - 1).
  std::vector<double> pmf(n + 1);
  double log_c = 0;  // log C(n, k)
  for (int k = 0; k <= n; ++k) {
    if (k > 0) log_c += std::log(static_cast<double>(n - k + 1)) - std::log(static_cast<double>(k));
    pmf[k] = std::exp(log_c - n * std::log(2.0));
  }
  int j = 1;
  double tail = 0;  // P(B <= j - 1)
  double coverage = 1 - 2 * pmf[0];
  for (int cand = 2; cand <= (n + 1) / 2; ++cand) {
    const double t = tail + pmf[cand - 1];
    const double c = 1 - 2 * (pmf[0] + t);
    if (c < confidence) break;
    tail = t;
    j = cand;
    coverage = c;
  }
  if (n == 1) coverage = 0;
  out.low = sorted[j - 1];
  out.high = sorted[n - j];
  out.coverage = std::max(coverage, 0.0);
  return out;
}

}  // namespace hetbench::server
