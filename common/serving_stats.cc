#include "common/serving_stats.h"

#include <algorithm>
#include <cmath>
#include <random>

namespace hetbench {

std::vector<int64_t> PoissonSchedule(uint64_t seed, double qps, int64_t duration_ns, int64_t max_queries) {
  std::vector<int64_t> out;
  if (!(qps > 0) || !std::isfinite(qps) || duration_ns <= 0 || max_queries <= 0) return out;
  std::mt19937_64 rng(seed);
  const double mean_gap_ns = 1e9 / qps;
  double t = 0;
  while (static_cast<int64_t>(out.size()) < max_queries) {
    const double u = static_cast<double>(rng() >> 11) * 0x1.0p-53;  // [0, 1), 53 bits
    t += -std::log1p(-u) * mean_gap_ns;
    if (t >= static_cast<double>(duration_ns)) break;
    out.push_back(static_cast<int64_t>(std::llround(t)));
  }
  return out;
}

int64_t NearestRank(const std::vector<int64_t>& sorted, double percentile) {
  if (sorted.empty()) return 0;
  const double n = static_cast<double>(sorted.size());
  // The small slack keeps e.g. 90% of 100 at rank 90 despite rounding.
  auto rank = static_cast<int64_t>(std::ceil(percentile / 100.0 * n - 1e-9));
  rank = std::clamp<int64_t>(rank, 1, static_cast<int64_t>(sorted.size()));
  return sorted[static_cast<size_t>(rank - 1)];
}

std::vector<int64_t> MergeSorted(const std::vector<std::vector<int64_t>>& sorted_parts) {
  std::vector<int64_t> out;
  size_t total = 0;
  for (const auto& p : sorted_parts) total += p.size();
  out.reserve(total);
  for (const auto& p : sorted_parts) {
    const auto middle = static_cast<std::ptrdiff_t>(out.size());
    out.insert(out.end(), p.begin(), p.end());
    std::inplace_merge(out.begin(), out.begin() + middle, out.end());
  }
  return out;
}

namespace {

// log P(X = 0), and log P(X = k + 1) from log P(X = k), for X ~ Binomial(n, q).
double LogPmf0(int64_t n, double q) { return static_cast<double>(n) * std::log1p(-q); }

double NextLogPmf(double log_pmf_k, int64_t k, int64_t n, double log_odds) {
  return log_pmf_k + std::log(static_cast<double>(n - k) / static_cast<double>(k + 1)) + log_odds;
}

}  // namespace

double BinomialCdf(int64_t k, int64_t n, double q) {
  if (k < 0) return 0;
  if (k >= n || q <= 0) return 1;
  if (q >= 1) return 0;
  const double log_odds = std::log(q) - std::log1p(-q);
  double log_pmf = LogPmf0(n, q), sum = 0;
  for (int64_t i = 0; i <= k; ++i) {
    sum += std::exp(log_pmf);
    log_pmf = NextLogPmf(log_pmf, i, n, log_odds);
  }
  return std::min(sum, 1.0);
}

EarlyStopping EarlyStop(int64_t queries, int64_t over_bound, double percentile, double confidence) {
  EarlyStopping out;
  const double q = 1 - percentile / 100.0, alpha = 1 - confidence;
  if (!(q > 0 && q < 1) || !(alpha > 0 && alpha < 1) || over_bound < 0) return out;
  // The fewest queries for `over_bound`: P(X <= t + 1) falls as n grows.
  auto ok = [&](int64_t n) { return BinomialCdf(over_bound + 1, n, q) <= alpha; };
  int64_t hi = std::max<int64_t>(over_bound + 2, 1);
  while (!ok(hi)) hi *= 2;
  int64_t lo = over_bound + 1;  // fails: X <= n is certain
  while (hi - lo > 1) {
    const int64_t mid = lo + (hi - lo) / 2;
    (ok(mid) ? hi : lo) = mid;
  }
  out.min_queries = hi;
  out.met = queries >= out.min_queries;
  // The most queries over the bound `queries` may hold: the largest t with
  // P(X <= t + 1) <= alpha, summing the pmf upward once.
  if (queries > 0) {
    const double log_odds = std::log(q) - std::log1p(-q);
    double log_pmf = LogPmf0(queries, q), cdf = 0;
    int64_t k = 0;
    for (; k <= queries; ++k) {
      cdf += std::exp(log_pmf);
      if (cdf > alpha) break;
      if (k < queries) log_pmf = NextLogPmf(log_pmf, k, queries, log_odds);
    }
    out.tolerable_over = k - 2;  // P(X <= k - 1) <= alpha holds for t + 1 = k - 1
  }
  return out;
}

int64_t EarlyStoppingEstimate(const std::vector<int64_t>& sorted, double percentile, double confidence) {
  const auto n = static_cast<int64_t>(sorted.size());
  const int64_t t = EarlyStop(n, 0, percentile, confidence).tolerable_over;
  if (t < 0 || t >= n) return 0;
  return sorted[static_cast<size_t>(n - 1 - t)];
}

}  // namespace hetbench
