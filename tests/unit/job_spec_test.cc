#include "common/job_spec.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace hetbench {
namespace {

using ::testing::HasSubstr;

v1::JobSpec Valid() { return WithDefaults(v1::JobSpec()); }

TEST(JobSpecTest, DefaultsAreFilledAndValid) {
  v1::JobSpec s = Valid();
  EXPECT_EQ(s.model(), "mlp");
  EXPECT_EQ(s.dataset(), "fashion-mnist");
  ASSERT_EQ(s.batch_sizes_size(), 1);
  EXPECT_EQ(s.batch_sizes(0), 128);
  ASSERT_EQ(s.targets_size(), 1);
  EXPECT_EQ(s.targets(0).device_kind(), v1::DEVICE_KIND_CPU);
  EXPECT_EQ(s.seed(), 42u);
  EXPECT_EQ(s.train().warmup_steps(), 10);
  EXPECT_DOUBLE_EQ(s.train().epochs(), 1.0);
  EXPECT_DOUBLE_EQ(s.train().learning_rate(), 1e-3);
  EXPECT_TRUE(ValidateJobSpec(s).ok()) << ValidateJobSpec(s);
}

TEST(JobSpecTest, ExplicitZeroesSurviveDefaults) {
  v1::JobSpec in;
  in.set_seed(0);
  in.mutable_train()->set_warmup_steps(0);
  in.mutable_train()->set_min_duration_seconds(0);
  v1::JobSpec s = WithDefaults(in);
  EXPECT_EQ(s.seed(), 0u);
  EXPECT_EQ(s.train().warmup_steps(), 0);
  EXPECT_EQ(s.train().min_duration_seconds(), 0.0);
}

TEST(JobSpecTest, BatchSizeZeroIsNamedWithItsIndex) {
  v1::JobSpec s = Valid();
  s.add_batch_sizes(64);
  s.add_batch_sizes(0);
  absl::Status st = ValidateJobSpec(s);
  EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(st.message()), HasSubstr("batch_sizes[2] = 0: must be >= 1"));
}

TEST(JobSpecTest, UnknownModelListsTheKnownOnes) {
  v1::JobSpec s = Valid();
  s.set_model("resnet999");
  absl::Status st = ValidateJobSpec(s);
  EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(st.message()), HasSubstr("model = \"resnet999\": unknown model; use one of: mlp"));
}

TEST(JobSpecTest, EveryBadFieldIsReportedAtOnce) {
  v1::JobSpec s = Valid();
  s.set_batch_sizes(0, -5);
  s.mutable_train()->set_learning_rate(-1);
  s.mutable_train()->set_min_steps(5'000'000);
  s.mutable_train()->set_max_steps(100);
  s.set_threads(-2);
  const std::string msg(ValidateJobSpec(s).message());
  EXPECT_THAT(msg, HasSubstr("batch_sizes[0] = -5"));
  EXPECT_THAT(msg, HasSubstr("train.learning_rate = -1"));
  EXPECT_THAT(msg, HasSubstr("train.min_steps = 5000000: must be <= train.max_steps = 100"));
  EXPECT_THAT(msg, HasSubstr("threads = -2"));
}

TEST(JobSpecTest, LimitsOnSizes) {
  v1::JobSpec s = Valid();
  s.set_batch_sizes(0, SpecLimits::kMaxBatchSize + 1);
  EXPECT_THAT(std::string(ValidateJobSpec(s).message()), HasSubstr("must be <= 65536"));
  s = Valid();
  s.set_batch_sizes(0, 128);
  s.add_batch_sizes(128);
  EXPECT_THAT(std::string(ValidateJobSpec(s).message()), HasSubstr("repeats batch_sizes[0]"));
  s = Valid();
  s.clear_batch_sizes();
  for (int i = 1; i <= 40; ++i) s.add_batch_sizes(i);
  for (int i = 0; i < 40; ++i) s.add_targets();
  EXPECT_THAT(std::string(ValidateJobSpec(s).message()), HasSubstr("tasks: at most 1024 per job"));
  s = Valid();
  s.mutable_train()->set_min_duration_seconds(std::nan(""));
  EXPECT_THAT(std::string(ValidateJobSpec(s).message()), HasSubstr("train.min_duration_seconds"));
}

TEST(JobSpecTest, EffectiveMinStepsIsOneEpochMinusWarmup) {
  v1::JobSpec s = Valid();  // warm-up 10, epochs 1
  EXPECT_EQ(EffectiveMinSteps(s, 128, 60000), 469 - 10);
  s.mutable_train()->set_min_steps(50);
  EXPECT_EQ(EffectiveMinSteps(s, 128, 60000), 50);
  s.mutable_train()->set_min_steps(0);
  s.mutable_train()->set_epochs(0.001);
  EXPECT_EQ(EffectiveMinSteps(s, 128, 60000), 1);  // never zero
}

}  // namespace
}  // namespace hetbench
