// The serving statistics (common/serving_stats.h): the seeded Poisson
// schedule, nearest-rank percentiles, exact merging, and LoadGen's early
// stopping, checked against the figures LoadGen itself prints.
#include "common/serving_stats.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <numeric>

namespace hetbench {
namespace {

TEST(PoissonScheduleTest, IsSeededBoundedAndItsGapsAreExponential) {
  const double qps = 1000;
  const std::vector<int64_t> s = PoissonSchedule(7, qps, 60'000'000'000, 20'000);
  ASSERT_EQ(s.size(), 20'000u) << "the query cap ends it first";
  EXPECT_EQ(PoissonSchedule(7, qps, 60'000'000'000, 20'000), s) << "the same seed, the same schedule";
  EXPECT_NE(PoissonSchedule(8, qps, 60'000'000'000, 20'000), s);
  EXPECT_TRUE(std::is_sorted(s.begin(), s.end()));
  // Kolmogorov-Smirnov against Exp(qps): D under the 1% critical value 1.628 / sqrt(n).
  std::vector<double> gaps;
  int64_t prev = 0;
  for (int64_t t : s) {
    gaps.push_back(static_cast<double>(t - prev) * 1e-9);
    prev = t;
  }
  std::sort(gaps.begin(), gaps.end());
  double d = 0;
  const double n = static_cast<double>(gaps.size());
  for (size_t i = 0; i < gaps.size(); ++i) {
    const double f = 1 - std::exp(-qps * gaps[i]);
    d = std::max({d, std::abs(f - static_cast<double>(i) / n), std::abs(static_cast<double>(i + 1) / n - f)});
  }
  EXPECT_LT(d, 1.628 / std::sqrt(n)) << "KS distance " << d;
  // A duration ends it first: about qps x seconds queries, all inside.
  const std::vector<int64_t> short_run = PoissonSchedule(7, qps, 2'000'000'000, 1'000'000);
  EXPECT_NEAR(static_cast<double>(short_run.size()), 2000, 4 * std::sqrt(2000.0));
  EXPECT_LT(short_run.back(), 2'000'000'000);
  EXPECT_TRUE(PoissonSchedule(7, 0, 1'000'000'000, 10).empty());
  EXPECT_TRUE(PoissonSchedule(7, std::nan(""), 1'000'000'000, 10).empty());
}

TEST(NearestRankTest, TakesTheValueAtRankCeilPN) {
  std::vector<int64_t> v(100);
  std::iota(v.begin(), v.end(), 1);  // 1..100
  EXPECT_EQ(NearestRank(v, 50), 50);
  EXPECT_EQ(NearestRank(v, 90), 90);
  EXPECT_EQ(NearestRank(v, 99), 99);
  EXPECT_EQ(NearestRank(v, 99.5), 100);
  EXPECT_EQ(NearestRank(v, 100), 100);
  EXPECT_EQ(NearestRank({5, 7, 9}, 50), 7);  // rank ceil(1.5) = 2
  EXPECT_EQ(NearestRank({5, 7, 9}, 1), 5);
  EXPECT_EQ(NearestRank({}, 99), 0);
}

TEST(MergeSortedTest, PercentilesOfMergedReplicasEqualThoseOfTheUnion) {
  const std::vector<int64_t> a = {1, 4, 4, 9, 30}, b = {2, 3, 5, 8, 8, 50, 51};
  std::vector<int64_t> all = a;
  all.insert(all.end(), b.begin(), b.end());
  std::sort(all.begin(), all.end());
  const std::vector<int64_t> merged = MergeSorted({a, b});
  EXPECT_EQ(merged, all);
  for (double p : {50.0, 90.0, 99.0}) EXPECT_EQ(NearestRank(merged, p), NearestRank(all, p));
  // Not the mean of the replicas' percentiles.
  EXPECT_NE(NearestRank(merged, 90), (NearestRank(a, 90) + NearestRank(b, 90)) / 2);
}

TEST(EarlyStoppingTest, TheMinimumsAndDiscardsAreLoadGens) {
  // With no query over the bound: 64 queries for p90 and 662 for p99.
  EXPECT_EQ(EarlyStop(0, 0, 90).min_queries, 64);
  EXPECT_EQ(EarlyStop(0, 0, 99).min_queries, 662);
  EXPECT_FALSE(EarlyStop(63, 0, 90).met);
  EXPECT_TRUE(EarlyStop(64, 0, 90).met);
  EXPECT_TRUE(EarlyStop(662, 0, 99).met);
  EXPECT_FALSE(EarlyStop(661, 0, 99).met);
  // Each query over the bound raises the minimum.
  EXPECT_EQ(EarlyStop(0, 1, 90).min_queries, 81);
  EXPECT_GT(EarlyStop(0, 10, 99).min_queries, EarlyStop(0, 9, 99).min_queries);
  // LoadGen's SingleStream summaries: "Processed at least 64 queries (2048). Would discard
  // 172 highest latency queries." and likewise for 2116 -> 178, 2145 -> 181, 7469 -> 685.
  EXPECT_EQ(EarlyStop(2048, 0, 90).tolerable_over, 172);
  EXPECT_EQ(EarlyStop(2116, 0, 90).tolerable_over, 178);
  EXPECT_EQ(EarlyStop(2145, 0, 90).tolerable_over, 181);
  EXPECT_EQ(EarlyStop(7469, 0, 90).tolerable_over, 685);
  EXPECT_EQ(EarlyStop(63, 0, 90).tolerable_over, -1);
  EXPECT_EQ(EarlyStop(64, 0, 90).tolerable_over, 0);
  // Stable at a million queries.
  const EarlyStopping big = EarlyStop(1'000'000, 9'000, 99);
  EXPECT_TRUE(big.met);
  EXPECT_GT(big.tolerable_over, 9'000);
  EXPECT_LT(big.tolerable_over, 10'000);
}

TEST(EarlyStoppingTest, TheEstimateIsTheLatencyBelowTheDiscardedOnes) {
  std::vector<int64_t> v(2048);
  std::iota(v.begin(), v.end(), 1);
  EXPECT_EQ(EarlyStoppingEstimate(v, 90), 2048 - 172);
  EXPECT_GE(EarlyStoppingEstimate(v, 90), NearestRank(v, 90)) << "never below the plain percentile";
  EXPECT_EQ(EarlyStoppingEstimate(std::vector<int64_t>(63, 5), 90), 0) << "too few queries";
}

TEST(BinomialCdfTest, MatchesSmallCasesExactly) {
  EXPECT_NEAR(BinomialCdf(0, 3, 0.5), 0.125, 1e-12);
  EXPECT_NEAR(BinomialCdf(1, 3, 0.5), 0.5, 1e-12);
  EXPECT_NEAR(BinomialCdf(2, 4, 0.1), 0.9963, 1e-12);
  EXPECT_EQ(BinomialCdf(3, 3, 0.5), 1);
  EXPECT_EQ(BinomialCdf(-1, 3, 0.5), 0);
}

}  // namespace
}  // namespace hetbench
