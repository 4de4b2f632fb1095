#include "common/spec_yaml.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <fstream>
#include <sstream>

#include "common/job_spec.h"

namespace hetbench {
namespace {

using ::testing::HasSubstr;

std::string ReadFixture(const std::string& name) {
  std::ifstream in(std::string(HETBENCH_FIXTURES) + "/specs/" + name);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

TEST(SpecYamlTest, ParsesTheSweepFixture) {
  auto spec = ParseJobSpecYaml(ReadFixture("sweep.yaml"));
  ASSERT_TRUE(spec.ok()) << spec.status();
  EXPECT_EQ(spec->name(), "mlp-sweep");
  ASSERT_EQ(spec->batch_sizes_size(), 3);
  EXPECT_EQ(spec->batch_sizes(2), 256);
  EXPECT_EQ(spec->targets(0).device_kind(), v1::DEVICE_KIND_CPU);
  EXPECT_EQ(spec->train().warmup_steps(), 5);
  EXPECT_EQ(spec->seed(), 7u);
  EXPECT_TRUE(ValidateJobSpec(WithDefaults(*spec)).ok());
}

TEST(SpecYamlTest, ParsesModelsLayersAndTorchScript) {
  auto study = ParseJobSpecYaml(ReadFixture("study.yaml"));
  ASSERT_TRUE(study.ok()) << study.status();
  ASSERT_EQ(study->models_size(), 5);
  EXPECT_EQ(study->models(4), "autoencoder");
  EXPECT_TRUE(ValidateJobSpec(WithDefaults(*study)).ok());

  auto layers = ParseJobSpecYaml(ReadFixture("cnn-layers.yaml"));
  ASSERT_TRUE(layers.ok()) << layers.status();
  EXPECT_TRUE(layers->layers().enabled());
  EXPECT_EQ(layers->layers().steps(), 20);
  EXPECT_EQ(layers->batch_sizes_size(), 3);

  auto script = ParseJobSpecYaml("models: [torchscript]\ntorchscript: {path: /m/net.pt, input_shape: [1, 28, 28]}\n");
  ASSERT_TRUE(script.ok()) << script.status();
  EXPECT_EQ(script->torchscript().path(), "/m/net.pt");
  ASSERT_EQ(script->torchscript().input_shape_size(), 3);
  EXPECT_TRUE(ValidateJobSpec(WithDefaults(*script)).ok());

  EXPECT_THAT(std::string(ParseJobSpecYaml("layers: {enabled: maybe}\n").status().message()),
              HasSubstr("layers.enabled (line 1): 'maybe' is not true or false"));
  EXPECT_THAT(std::string(ParseJobSpecYaml("torchscript: {input_shape: 784}\n").status().message()),
              HasSubstr("torchscript.input_shape (line 1): expected a list like [1, 28, 28]"));
}

TEST(SpecYamlTest, UnknownKeyIsNamedWithItsLine) {
  auto spec = ParseJobSpecYaml("model: mlp\nbatchsize: 64\n");
  ASSERT_FALSE(spec.ok());
  EXPECT_THAT(std::string(spec.status().message()), HasSubstr("batchsize (line 2): unknown field"));
}

TEST(SpecYamlTest, WrongTypeIsNamed) {
  auto spec = ParseJobSpecYaml("batch_sizes: [64, abc]\n");
  ASSERT_FALSE(spec.ok());
  EXPECT_THAT(std::string(spec.status().message()), HasSubstr("batch_sizes[1] (line 1): 'abc' is not an integer"));
  auto huge = ParseJobSpecYaml("batch_sizes: [2147483648]\n");
  ASSERT_FALSE(huge.ok());
  EXPECT_THAT(std::string(huge.status().message()),
              HasSubstr("batch_sizes[0] (line 1): '2147483648' is out of range: must be in [-2147483648, 2147483647]"));
  auto empty = ParseJobSpecYaml("targets: []\n");
  ASSERT_FALSE(empty.ok());
  EXPECT_THAT(std::string(empty.status().message()),
              HasSubstr("targets (line 1): empty: give at least one, e.g. [cpu], or leave targets out for any CPU"));
  spec = ParseJobSpecYaml("train: {epochs: many}\n");
  EXPECT_THAT(std::string(spec.status().message()), HasSubstr("train.epochs"));
  spec = ParseJobSpecYaml("targets: [{device_kind: fpga}]\n");
  EXPECT_THAT(std::string(spec.status().message()), HasSubstr("unknown device kind 'fpga'"));
}

TEST(SpecYamlTest, BrokenYamlAndEmptyDocument) {
  EXPECT_THAT(std::string(ParseJobSpecYaml("model: [unclosed\n").status().message()), HasSubstr("not valid YAML"));
  EXPECT_THAT(std::string(ParseJobSpecYaml("").status().message()), HasSubstr("empty"));
}

TEST(SpecYamlTest, RoundTripsTheEffectiveSpec) {
  v1::JobSpec spec = WithDefaults(*ParseJobSpecYaml(ReadFixture("sweep.yaml")));
  spec.mutable_targets(0)->set_agent_id("node-7");
  (*spec.mutable_targets(0)->mutable_labels())["rack"] = "r1";
  spec.set_repeats(3);
  spec.set_one_at_a_time(true);
  auto again = ParseJobSpecYaml(JobSpecToYaml(spec));
  ASSERT_TRUE(again.ok()) << again.status() << "\n" << JobSpecToYaml(spec);
  EXPECT_EQ(again->SerializeAsString(), spec.SerializeAsString()) << JobSpecToYaml(spec);
}

TEST(SpecYamlTest, OneAtATimeIsABoolean) {
  EXPECT_TRUE(ParseJobSpecYaml("one_at_a_time: true\n")->one_at_a_time());
  auto bad = ParseJobSpecYaml("one_at_a_time: 2\n");
  ASSERT_FALSE(bad.ok());
  EXPECT_THAT(std::string(bad.status().message()), HasSubstr("one_at_a_time"));
  EXPECT_THAT(std::string(bad.status().message()), HasSubstr("true or false"));
}

TEST(SpecYamlTest, ADuplicateKeyIsRefusedNamingTheKeyAndBothLines) {
  // yaml-cpp keeps both entries and a lookup sees the first: this once ran mlp silently.
  auto spec = ParseJobSpecYaml("name: x\nmodel: mlp\nbatch_sizes: [32]\nmodel: cnn\n");
  ASSERT_FALSE(spec.ok());
  EXPECT_EQ(spec.status().message(), "model (line 4): duplicate key, first given on line 2; keep one");
  auto nested = ParseJobSpecYaml("train:\n  min_steps: 5\n  min_steps: 6\n");
  ASSERT_FALSE(nested.ok());
  EXPECT_THAT(std::string(nested.status().message()), HasSubstr("train.min_steps (line 3): duplicate key"));
  auto labels = ParseJobSpecYaml("targets: [{device_kind: cpu, labels: {pool: a, pool: b}}]\n");
  ASSERT_FALSE(labels.ok());
  EXPECT_THAT(std::string(labels.status().message()), HasSubstr("targets[0].labels.pool"));
}

TEST(SpecYamlTest, AnOverlongListIsRefusedByItsCountBeforeItsEntriesAreRead) {
  std::string yaml = "batch_sizes: [";
  for (int i = 0; i < 100000; ++i) yaml += (i ? ",x" : "x");  // not even integers: never looked at
  yaml += "]\n";
  auto spec = ParseJobSpecYaml(yaml);
  ASSERT_FALSE(spec.ok());
  EXPECT_THAT(std::string(spec.status().message()), HasSubstr("batch_sizes (line 1): 100000 entries: at most 64"));
}


TEST(SpecYamlTest, ParallelAndSplitParseAndRoundTrip) {
  auto spec = ParseJobSpecYaml(R"(
models: [qnn]
parallel: {devices: [1, 2], collective_timeout_seconds: 5}
)");
  ASSERT_TRUE(spec.ok()) << spec.status();
  ASSERT_EQ(spec->parallel().devices_size(), 2);
  EXPECT_DOUBLE_EQ(spec->parallel().collective_timeout_seconds(), 5);
  auto back = ParseJobSpecYaml(JobSpecToYaml(WithDefaults(*spec)));
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->parallel().devices(1), 2);
  EXPECT_EQ(back->parallel().strategy(), "data");

  auto split = ParseJobSpecYaml(R"(
models: [qnn]
split:
  stages:
    - {layers: "0", target: {device_kind: cpu}}
    - {layers: "1-", target: {device_kind: qpu-sim}}
)");
  ASSERT_TRUE(split.ok()) << split.status();
  ASSERT_EQ(split->split().stages_size(), 2);
  EXPECT_EQ(split->split().stages(1).target().device_kind(), v1::DEVICE_KIND_QPU_SIM);
  auto again = ParseJobSpecYaml(JobSpecToYaml(WithDefaults(*split)));
  ASSERT_TRUE(again.ok()) << again.status() << "\n" << JobSpecToYaml(WithDefaults(*split));
  EXPECT_EQ(again->split().stages(1).layers(), "1-");
  EXPECT_EQ(again->split().stages(1).target().device_kind(), v1::DEVICE_KIND_QPU_SIM);

  EXPECT_THAT(std::string(ParseJobSpecYaml("split: {stages: [{layers: \"0\", device: cpu}]}").status().message()),
              HasSubstr("device"));

  auto across = ParseJobSpecYaml(R"(
models: [mlp]
split:
  across_agents: true
  collective_timeout_seconds: 5
  stages:
    - {layers: "0-2", target: {device_kind: cpu}}
    - {layers: "3-", target: {device_kind: cpu}}
)");
  ASSERT_TRUE(across.ok()) << across.status();
  const v1::JobSpec effective = WithDefaults(*across);
  auto round = ParseJobSpecYaml(JobSpecToYaml(effective));
  ASSERT_TRUE(round.ok()) << round.status() << "\n" << JobSpecToYaml(effective);
  EXPECT_TRUE(round->split().across_agents());
  EXPECT_DOUBLE_EQ(round->split().collective_timeout_seconds(), 5);
  EXPECT_DOUBLE_EQ(round->split().gang_timeout_seconds(), 600);
  EXPECT_THAT(std::string(ParseJobSpecYaml("split: {across_agents: maybe}").status().message()),
              HasSubstr("split.across_agents"));
}

}  // namespace
}  // namespace hetbench
