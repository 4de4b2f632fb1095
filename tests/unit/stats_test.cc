#include "common/stats.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace hetbench {
namespace {

TEST(PercentileTest, MatchesNumpyLinearInterpolation) {
  const std::vector<double> v = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10};
  // numpy.percentile(range(1, 11), [25, 50, 90, 99]) = 3.25, 5.5, 9.1, 9.91
  EXPECT_DOUBLE_EQ(PercentileOfSorted(v, 0.25), 3.25);
  EXPECT_DOUBLE_EQ(PercentileOfSorted(v, 0.50), 5.5);
  EXPECT_NEAR(PercentileOfSorted(v, 0.90), 9.1, 1e-12);
  EXPECT_NEAR(PercentileOfSorted(v, 0.99), 9.91, 1e-12);
  EXPECT_DOUBLE_EQ(PercentileOfSorted(v, 0.0), 1);
  EXPECT_DOUBLE_EQ(PercentileOfSorted(v, 1.0), 10);
}

TEST(PercentileTest, EmptyAndSingle) {
  EXPECT_EQ(PercentileOfSorted({}, 0.5), 0.0);
  EXPECT_EQ(PercentileOfSorted({42}, 0.99), 42.0);
}

TEST(TrimmedMeanTest, DropsTheTailsOnEachSideThenAverages) {
  std::vector<double> v{9, 1, 100, 3, 5, 7, 2, 4};  // trim 1/8: drops 1 and 100
  EXPECT_DOUBLE_EQ(TrimmedMeanInPlace(v, 0.125), (2 + 3 + 4 + 5 + 7 + 9) / 6.0);
  std::vector<double> w{4, 1, 100};
  EXPECT_DOUBLE_EQ(TrimmedMeanInPlace(w, 0), 35.0);  // no trim: the mean, outlier and all
  std::vector<double> none;
  EXPECT_EQ(TrimmedMeanInPlace(none, 0.25), 0.0);
}

TEST(TimingStatsTest, AggregatesDurationsThroughputAndWindow) {
  // Four steps of 10, 20, 30, 40 ms, 32 samples each, back to back from t=1 s.
  std::vector<StepSample> steps;
  int64_t t = 1'000'000'000;
  for (int ms : {40, 10, 30, 20}) {  // unsorted on purpose
    steps.push_back({t, ms * 1'000'000LL, 32});
    t += ms * 1'000'000LL;
  }
  v1::TimingStats s = ComputeTimingStats(steps);
  EXPECT_EQ(s.count(), 4);
  EXPECT_EQ(s.items(), 128);
  EXPECT_DOUBLE_EQ(s.mean_ns(), 25e6);
  EXPECT_NEAR(s.stddev_ns(), 12.909944487e6, 1e3);  // sample stddev of 10,20,30,40
  EXPECT_DOUBLE_EQ(s.min_ns(), 10e6);
  EXPECT_DOUBLE_EQ(s.max_ns(), 40e6);
  EXPECT_DOUBLE_EQ(s.p50_ns(), 25e6);
  EXPECT_DOUBLE_EQ(s.p25_ns(), 17.5e6);
  EXPECT_DOUBLE_EQ(s.p75_ns(), 32.5e6);
  EXPECT_DOUBLE_EQ(s.iqr_ns(), 15e6);
  EXPECT_DOUBLE_EQ(s.total_ns(), 100e6);
  EXPECT_NEAR(s.samples_per_second(), 1280.0, 1e-9);  // 128 samples in 0.1 s of steps
  EXPECT_NEAR(s.window_seconds(), 0.1, 1e-12);
}

TEST(TimingStatsTest, WindowIncludesGapsBetweenSteps) {
  std::vector<StepSample> steps = {{0, 1'000'000, 1}, {9'000'000, 1'000'000, 1}};
  v1::TimingStats s = ComputeTimingStats(steps);
  EXPECT_NEAR(s.window_seconds(), 0.010, 1e-12);
  EXPECT_NEAR(s.samples_per_second(), 1000.0, 1e-9);  // busy time only: 2 samples in 2 ms
  EXPECT_EQ(s.stddev_ns(), 0.0);
}

TEST(TimingStatsTest, EmptyInputGivesZeroCount) { EXPECT_EQ(ComputeTimingStats({}).count(), 0); }

TEST(StudentTTest, MatchesTheTablesValues) {
  // Two-sided 95% critical values from the standard t table.
  EXPECT_NEAR(StudentTQuantile(0.975, 1), 12.706, 1e-3);
  EXPECT_NEAR(StudentTQuantile(0.975, 2), 4.303, 1e-3);
  EXPECT_NEAR(StudentTQuantile(0.975, 4), 2.776, 1e-3);
  EXPECT_NEAR(StudentTQuantile(0.975, 30), 2.042, 1e-3);
  EXPECT_NEAR(StudentTQuantile(0.975, 1e6), 1.960, 1e-3) << "the normal's in the limit";
  EXPECT_NEAR(StudentTCdf(0, 7), 0.5, 1e-12);
  EXPECT_NEAR(StudentTCdf(-2.776, 4), 0.025, 1e-4);
  EXPECT_NEAR(StudentTCdf(1.5, 2.5) + StudentTCdf(-1.5, 2.5), 1.0, 1e-12) << "symmetric, for a fractional df too";
}

}  // namespace
}  // namespace hetbench
