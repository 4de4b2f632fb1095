// The validate section of a job spec: defaults stated, bad input refused
// naming the field and the fix, YAML both ways, the SKU key.
#include "common/validate_spec.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "common/job_spec.h"
#include "common/spec_yaml.h"

namespace hetbench {
namespace {

using ::testing::HasSubstr;

v1::JobSpec Quick() {
  v1::JobSpec spec;
  spec.mutable_validate()->set_level("quick");
  return spec;
}

std::string Refusal(const v1::JobSpec& spec) {
  const absl::Status s = ValidateJobSpec(WithDefaults(spec));
  EXPECT_FALSE(s.ok());
  return std::string(s.message());
}

TEST(ValidateSpecTest, DefaultsAreFilledAndShown) {
  const v1::JobSpec spec = WithDefaults(Quick());
  ASSERT_TRUE(ValidateJobSpec(spec).ok()) << ValidateJobSpec(spec);
  const v1::ValidateSpec& v = spec.validate();
  EXPECT_EQ(v.time_box_seconds(), 8);
  EXPECT_EQ(v.repetitions(), 8);
  EXPECT_EQ(v.min_effect(), 0.025);
  EXPECT_EQ(v.spread_multiple(), 3);
  EXPECT_EQ(v.spread_floor(), 0.01);
  EXPECT_EQ(v.confidence(), 0.99);
  EXPECT_EQ(v.min_degraded_tests(), 2);
  ASSERT_EQ(spec.models_size(), 1);
  EXPECT_EQ(spec.models(0), kValidateModel);
  ASSERT_EQ(spec.targets_size(), 1);  // every device
  EXPECT_EQ(spec.targets(0).device_kind(), v1::DEVICE_KIND_UNSPECIFIED);
  EXPECT_EQ(spec.name(), "validate-quick");
  v1::JobSpec standard;
  standard.mutable_validate()->set_level("standard");
  EXPECT_EQ(WithDefaults(standard).validate().time_box_seconds(), 40);
  EXPECT_EQ(WithDefaults(standard).validate().repetitions(), 15);
}

TEST(ValidateSpecTest, BadInputIsRefusedNamingTheField) {
  v1::JobSpec spec = Quick();
  spec.mutable_validate()->set_level("deep");
  EXPECT_THAT(Refusal(spec), HasSubstr("validate.level = 'deep': unknown; use quick or standard"));
  spec = Quick();
  spec.set_one_at_a_time(true);
  EXPECT_THAT(Refusal(spec), HasSubstr("one_at_a_time: a benchmark's field"));
  spec = Quick();
  spec.mutable_validate()->set_time_box_seconds(-1);
  EXPECT_THAT(Refusal(spec), HasSubstr("validate.time_box_seconds = -1: must be in (0, 60] for level quick"));
  for (const char* field : {"min_effect", "spread_floor", "confidence", "cross_kind_tolerance", "power_tolerance"}) {
    for (double bad : {0.0, 1.0, -0.5, static_cast<double>(NAN)}) {
      spec = Quick();
      const auto* d = spec.validate().GetDescriptor()->FindFieldByName(field);
      spec.mutable_validate()->GetReflection()->SetDouble(spec.mutable_validate(), d, bad);
      EXPECT_THAT(Refusal(spec), HasSubstr(absl::StrCat("validate.", field, " = "))) << field << " " << bad;
      EXPECT_THAT(Refusal(spec), HasSubstr("must be in (0, 1)")) << field << " " << bad;
    }
  }
  spec = Quick();
  spec.mutable_validate()->add_tests("matmull");
  EXPECT_THAT(Refusal(spec), HasSubstr("validate.tests[0] = 'matmull': unknown test; use one of matmul,"));
  spec = Quick();
  spec.add_models("mlp");
  EXPECT_THAT(Refusal(spec), HasSubstr("models: a validation runs its own suite; remove models"));
  spec = Quick();
  spec.mutable_serving()->set_scenario("server");
  EXPECT_THAT(Refusal(spec), HasSubstr("validate: cannot be combined with serving"));
  spec = Quick();
  spec.mutable_validate()->mutable_baseline()->set_schema("other");
  EXPECT_THAT(Refusal(spec),
              HasSubstr("validate.baseline.schema = 'other': this coordinator reads hetbench.baseline.v1"));
  spec = Quick();
  spec.add_targets()->set_device_id("cpu0");
  EXPECT_THAT(Refusal(spec), HasSubstr("targets[0].device_id: give targets[0].agent_id too"));
  v1::JobSpec no_level;
  no_level.mutable_validate()->set_time_box_seconds(3);
  EXPECT_THAT(Refusal(no_level), HasSubstr("validate: set, but validate.level is empty"));
}

TEST(ValidateSpecTest, YamlBothWays) {
  auto spec = ParseJobSpecYaml(
      "validate:\n  level: standard\n  time_box_seconds: 30\n  min_effect: 0.04\n  tests: [matmul, train_mlp]\n"
      "  quarantine_degraded: true\ntargets:\n  - {device_kind: cpu, agent_id: a1, device_id: cpu0}\n");
  ASSERT_TRUE(spec.ok()) << spec.status();
  EXPECT_EQ(spec->validate().level(), "standard");
  EXPECT_EQ(spec->validate().time_box_seconds(), 30);
  EXPECT_TRUE(spec->validate().quarantine_degraded());
  EXPECT_EQ(spec->targets(0).device_id(), "cpu0");
  const v1::JobSpec effective = WithDefaults(*spec);
  ASSERT_TRUE(ValidateJobSpec(effective).ok()) << ValidateJobSpec(effective);
  auto again = ParseJobSpecYaml(JobSpecToYaml(effective));
  ASSERT_TRUE(again.ok()) << again.status() << "\n" << JobSpecToYaml(effective);
  EXPECT_EQ(again->validate().min_effect(), 0.04);
  EXPECT_EQ(again->validate().tests_size(), 2);
  EXPECT_EQ(again->targets(0).device_id(), "cpu0");
  auto bad = ParseJobSpecYaml("validate:\n  level: quick\n  box: 3\n");
  ASSERT_FALSE(bad.ok());
  EXPECT_THAT(std::string(bad.status().message()), HasSubstr("box"));
}

TEST(ValidateSpecTest, SuitesFitTheKindAndTheSkuKeysWhatShouldMeasureAlike) {
  EXPECT_THAT(SuiteFor(v1::DEVICE_KIND_QPU_SIM, "quick"), ::testing::Contains("gate_bandwidth"));
  EXPECT_THAT(SuiteFor(v1::DEVICE_KIND_CPU, "quick"), ::testing::Contains("train_mlp"));
  v1::Device d;
  d.set_kind(v1::DEVICE_KIND_CPU);
  d.set_model("AMD EPYC");
  d.set_cores(2);
  EXPECT_EQ(SkuOf(d, 0, "0.4.0"), "cpu|AMD EPYC|-|2|all|0.4.0");
  EXPECT_EQ(SkuOf(d, 1, "0.4.0"), "cpu|AMD EPYC|-|2|1|0.4.0");
}

}  // namespace
}  // namespace hetbench
