// Why a phase is noisy (common/step_modes.h): a machine switching between
// two speeds is named, with the modes and when the slow stretches were; an
// ordinary long tail is not called two modes.
#include "common/step_modes.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <random>

#include "common/job_spec.h"
#include "common/phase_validity.h"

namespace hetbench {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

// `n` steps of `ms` with a 2% normal jitter.
void Append(std::vector<int64_t>* v, int n, double ms, std::mt19937_64& rng) {
  std::normal_distribution<double> jitter(1.0, 0.02);
  for (int i = 0; i < n; ++i) v->push_back(static_cast<int64_t>(ms * 1e6 * jitter(rng)));
}

TEST(StepModesTest, ASlowStretchInTheMiddleIsTwoModesAndItsTime) {
  std::mt19937_64 rng(1);
  std::vector<int64_t> steps;
  Append(&steps, 100, 10, rng);
  Append(&steps, 100, 16, rng);
  Append(&steps, 100, 10, rng);
  const StepModes m = FindStepModes(steps);
  ASSERT_TRUE(m.two_modes) << m.separation;
  EXPECT_NEAR(m.fast_ns, 10e6, 0.3e6);
  EXPECT_NEAR(m.slow_ns, 16e6, 0.5e6);
  EXPECT_NEAR(m.slow_share, 1.0 / 3, 0.01);
  ASSERT_EQ(m.stretches.size(), 1u);
  EXPECT_EQ(m.stretches[0].first, 100);
  EXPECT_EQ(m.stretches[0].last, 199);
  const std::string text = DescribeStepModes(m, 300, 3.9);
  EXPECT_THAT(text, HasSubstr("step times have two modes: 10.0"));
  EXPECT_THAT(text, HasSubstr("(67% of steps) and 1"));
  EXPECT_THAT(text, HasSubstr("(33%, 1.6"));
  EXPECT_THAT(text, HasSubstr("the slow ones in 1 stretch (1.3-2.6 s into the phase)"));
}

TEST(StepModesTest, SlowStepsScatteredThroughTheRunAreSaidToBe) {
  std::mt19937_64 rng(2);
  std::bernoulli_distribution slow(0.15);
  std::vector<int64_t> steps;
  for (int i = 0; i < 500; ++i) Append(&steps, 1, slow(rng) ? 16 : 10, rng);
  const StepModes m = FindStepModes(steps);
  ASSERT_TRUE(m.two_modes);
  EXPECT_THAT(DescribeStepModes(m, 500, 6), HasSubstr("the slow steps scattered through the run, not in stretches"));
}

TEST(StepModesTest, ALongTailOrAWideSingleModeIsNotTwoModes) {
  for (uint64_t seed : {3, 4, 5}) {
    std::mt19937_64 rng(seed);
    std::lognormal_distribution<double> tail(std::log(10e6), 0.5);
    std::exponential_distribution<double> expo(1 / 5e6);
    std::vector<int64_t> lognormal, shifted_exp;
    for (int i = 0; i < 2000; ++i) {
      lognormal.push_back(static_cast<int64_t>(tail(rng)));
      shifted_exp.push_back(static_cast<int64_t>(8e6 + expo(rng)));
    }
    EXPECT_FALSE(FindStepModes(lognormal).two_modes) << seed << ": D = " << FindStepModes(lognormal).separation;
    EXPECT_FALSE(FindStepModes(shifted_exp).two_modes) << seed << ": D = " << FindStepModes(shifted_exp).separation;
  }
  std::mt19937_64 rng(6);
  std::vector<int64_t> few;
  Append(&few, 20, 10, rng);
  Append(&few, 19, 16, rng);
  EXPECT_FALSE(FindStepModes(few).two_modes) << "fewer than 40 steps";
}

TEST(StepModesTest, ANoisyPhaseSaysItsTwoModesInItsReason) {
  std::mt19937_64 rng(7);
  std::vector<int64_t> steps;
  Append(&steps, 60, 10, rng);
  Append(&steps, 60, 16, rng);
  std::vector<int64_t> sorted = steps;
  std::sort(sorted.begin(), sorted.end());
  v1::JobSpec spec = WithDefaults(v1::JobSpec());
  v1::PhaseResult phase;
  phase.set_phase(v1::PHASE_INFER);
  v1::TimingStats* s = phase.mutable_stats();
  s->set_count(120);
  s->set_p50_ns(static_cast<double>(sorted[60]));
  s->set_iqr_ns(static_cast<double>(sorted[90] - sorted[30]));
  s->set_window_seconds(1.56);
  JudgeValidity(spec, 120, &phase, nullptr, &steps);
  ASSERT_FALSE(phase.valid());
  EXPECT_THAT(phase.invalid_reasons(0), HasSubstr("too noisy: IQR/median = "));
  EXPECT_THAT(phase.invalid_reasons(0), HasSubstr("; step times have two modes: "));
  EXPECT_THAT(phase.invalid_reasons(0), HasSubstr("1 stretch (0.8-1.6 s into the phase)"));
  JudgeValidity(spec, 120, &phase);  // without the steps: the spread alone
  EXPECT_THAT(phase.invalid_reasons(0), Not(HasSubstr("two modes")));
}

}  // namespace
}  // namespace hetbench
