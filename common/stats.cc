#include "stats.h"

#include <algorithm>
#include <cmath>

namespace hetbench {

double MedianInPlace(std::vector<double>& values) {
  const size_t n = values.size();
  if (n == 0) return 0.0;
  auto mid = values.begin() + static_cast<std::ptrdiff_t>(n / 2);
  std::nth_element(values.begin(), mid, values.end());
  const double hi = *mid;
  if (n % 2 == 1) return hi;
  return (hi + *std::max_element(values.begin(), mid)) / 2;
}

double TrimmedMeanInPlace(std::vector<double>& values, double trim) {
  if (values.empty()) return 0.0;
  std::sort(values.begin(), values.end());
  const auto cut = static_cast<size_t>(static_cast<double>(values.size()) * std::clamp(trim, 0.0, 0.49));
  double sum = 0;
  for (size_t i = cut; i < values.size() - cut; ++i) sum += values[i];
  return sum / static_cast<double>(values.size() - 2 * cut);
}

double PercentileOfSorted(const std::vector<double>& sorted, double q) {
  if (sorted.empty()) return 0.0;
  if (q <= 0.0) return sorted.front();
  if (q >= 1.0) return sorted.back();
  const double pos = q * static_cast<double>(sorted.size() - 1);
  const auto lo = static_cast<size_t>(std::floor(pos));
  const size_t hi = std::min(lo + 1, sorted.size() - 1);
  const double frac = pos - static_cast<double>(lo);
  return sorted[lo] + (sorted[hi] - sorted[lo]) * frac;
}

v1::TimingStats ComputeTimingStats(const std::vector<StepSample>& steps) {
  v1::TimingStats out;
  if (steps.empty()) return out;
  std::vector<double> d;
  d.reserve(steps.size());
  int64_t items = 0;
  int64_t first_start = steps.front().start_ns;
  int64_t last_end = steps.front().start_ns + steps.front().duration_ns;
  double sum = 0.0;
  for (const StepSample& s : steps) {
    d.push_back(static_cast<double>(s.duration_ns));
    items += s.items;
    sum += static_cast<double>(s.duration_ns);
    first_start = std::min(first_start, s.start_ns);
    last_end = std::max(last_end, s.start_ns + s.duration_ns);
  }
  const double n = static_cast<double>(d.size());
  const double mean = sum / n;
  double sq = 0.0;
  for (double v : d) sq += (v - mean) * (v - mean);
  std::sort(d.begin(), d.end());

  out.set_count(static_cast<int64_t>(d.size()));
  out.set_items(items);
  out.set_mean_ns(mean);
  out.set_stddev_ns(d.size() > 1 ? std::sqrt(sq / (n - 1.0)) : 0.0);
  out.set_min_ns(d.front());
  out.set_max_ns(d.back());
  out.set_p25_ns(PercentileOfSorted(d, 0.25));
  out.set_p50_ns(PercentileOfSorted(d, 0.50));
  out.set_p75_ns(PercentileOfSorted(d, 0.75));
  out.set_p90_ns(PercentileOfSorted(d, 0.90));
  out.set_p99_ns(PercentileOfSorted(d, 0.99));
  out.set_iqr_ns(out.p75_ns() - out.p25_ns());
  out.set_total_ns(sum);
  out.set_samples_per_second(sum > 0 ? static_cast<double>(items) / (sum * 1e-9) : 0.0);
  out.set_window_seconds(static_cast<double>(last_end - first_start) * 1e-9);
  return out;
}

namespace {

// The continued fraction of the regularized incomplete beta function I_x(a, b)
// (modified Lentz), valid for x < (a + 1) / (a + b + 2).
double BetaFraction(double a, double b, double x) {
  constexpr double kTiny = 1e-300, kEps = 1e-15;
  double c = 1, d = 1 - (a + b) * x / (a + 1);
  if (std::abs(d) < kTiny) d = kTiny;
  d = 1 / d;
  double h = d;
  for (int m = 1; m <= 300; ++m) {
    const double m2 = 2.0 * m;
    double aa = m * (b - m) * x / ((a + m2 - 1) * (a + m2));
    d = 1 + aa * d;
    d = std::abs(d) < kTiny ? kTiny : d;
    c = 1 + aa / c;
    c = std::abs(c) < kTiny ? kTiny : c;
    d = 1 / d;
    h *= d * c;
    aa = -(a + m) * (a + b + m) * x / ((a + m2) * (a + m2 + 1));
    d = 1 + aa * d;
    d = std::abs(d) < kTiny ? kTiny : d;
    c = 1 + aa / c;
    c = std::abs(c) < kTiny ? kTiny : c;
    d = 1 / d;
    const double del = d * c;
    h *= del;
    if (std::abs(del - 1) < kEps) break;
  }
  return h;
}

double RegularizedBeta(double a, double b, double x) {
  if (x <= 0) return 0;
  if (x >= 1) return 1;
  const double front =
      std::exp(std::lgamma(a + b) - std::lgamma(a) - std::lgamma(b) + a * std::log(x) + b * std::log1p(-x));
  if (x < (a + 1) / (a + b + 2)) return front * BetaFraction(a, b, x) / a;
  return 1 - front * BetaFraction(b, a, 1 - x) / b;
}

}  // namespace

double StudentTCdf(double t, double df) {
  const double tail = 0.5 * RegularizedBeta(df / 2, 0.5, df / (df + t * t));  // P(T > |t|)
  return t >= 0 ? 1 - tail : tail;
}

double StudentTQuantile(double p, double df) {
  double lo = -1e6, hi = 1e6;
  for (int i = 0; i < 200 && hi - lo > 1e-12 * std::max(1.0, std::abs(lo)); ++i) {
    const double mid = (lo + hi) / 2;
    (StudentTCdf(mid, df) < p ? lo : hi) = mid;
  }
  return (lo + hi) / 2;
}

}  // namespace hetbench
