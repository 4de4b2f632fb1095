// `hetbench submit`'s flags applied over a spec file: a flag given overrides
// its field, one not given leaves the file's, bad values name the flag.
#include "client/commands/spec_flags.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace hetbench::client {
namespace {

using ::testing::HasSubstr;

v1::JobSpec FromFile() {
  v1::JobSpec s;
  s.set_model("cnn");
  s.add_batch_sizes(32);
  s.mutable_train()->set_min_steps(100);
  s.mutable_train()->set_warmup_steps(7);
  s.set_seed(3);
  return s;
}

TEST(SpecFlagsTest, GivenFlagsOverrideTheFileAndOthersKeepIt) {
  SpecFlags f;
  f.models = {"mlp", "lstm"};
  f.batch_sizes = {64, 128};
  f.targets = {"cpu:python", "gpu"};
  f.min_steps = 0;  // zero is a value when given
  f.given = {"--min-steps"};
  f.warmup_steps = 99;  // not given: the file's 7 stays
  f.costs = {"gpu=2.48"};
  f.layers = true;
  auto spec = ApplySpecFlags(FromFile(), f);
  ASSERT_TRUE(spec.ok()) << spec.status();
  EXPECT_TRUE(spec->model().empty());
  EXPECT_THAT(spec->models(), ::testing::ElementsAre("mlp", "lstm"));
  EXPECT_THAT(spec->batch_sizes(), ::testing::ElementsAre(64, 128));
  ASSERT_EQ(spec->targets_size(), 2);
  EXPECT_EQ(spec->targets(0).device_kind(), v1::DEVICE_KIND_CPU);
  EXPECT_EQ(spec->targets(0).executor(), "python");
  EXPECT_EQ(spec->targets(1).device_kind(), v1::DEVICE_KIND_GPU);
  EXPECT_EQ(spec->train().min_steps(), 0);
  EXPECT_EQ(spec->train().warmup_steps(), 7);
  EXPECT_EQ(spec->seed(), 3u);
  EXPECT_EQ(spec->cost().usd_per_hour().at("gpu"), 2.48);
  EXPECT_TRUE(spec->layers().enabled());
}

TEST(SpecFlagsTest, OneModelIsWrittenAsModelSoErrorsNameTheFieldTheUserWrote) {
  SpecFlags f;
  f.models = {"mlp"};
  auto spec = ApplySpecFlags(v1::JobSpec(), f);
  ASSERT_TRUE(spec.ok());
  EXPECT_EQ(spec->model(), "mlp");
  EXPECT_EQ(spec->models_size(), 0);
}

TEST(SpecFlagsTest, ATorchScriptPathAloneMeansTheTorchScriptModel) {
  SpecFlags f;
  f.torchscript_path = "/models/net.pt";
  f.input_shape = {1, 28, 28};
  auto spec = ApplySpecFlags(v1::JobSpec(), f);
  ASSERT_TRUE(spec.ok());
  EXPECT_THAT(spec->models(), ::testing::ElementsAre("torchscript"));
  EXPECT_THAT(spec->torchscript().input_shape(), ::testing::ElementsAre(1, 28, 28));
}

TEST(SpecFlagsTest, BadTargetsAndCostsNameTheFlag) {
  SpecFlags f;
  f.targets = {"fpga"};
  auto spec = ApplySpecFlags(v1::JobSpec(), f);
  ASSERT_FALSE(spec.ok());
  EXPECT_THAT(std::string(spec.status().message()), HasSubstr("--target fpga: unknown device kind"));
  SpecFlags c;
  c.costs = {"gpu:2.48"};
  spec = ApplySpecFlags(v1::JobSpec(), c);
  ASSERT_FALSE(spec.ok());
  EXPECT_THAT(std::string(spec.status().message()), HasSubstr("--cost gpu:2.48: expected KIND=USD_PER_HOUR"));
}

TEST(SpecFlagsTest, ServingFlagsMakeTheServingSectionAndSeveralRatesASweep) {
  SpecFlags f;
  f.scenario = "server";
  f.qps = {250};
  f.latency_bound_ms = 20;
  f.serve_duration = 3;
  f.given = {"--latency-bound-ms", "--serve-duration"};
  auto spec = ApplySpecFlags(FromFile(), f);
  ASSERT_TRUE(spec.ok()) << spec.status();
  EXPECT_EQ(spec->serving().scenario(), "server");
  EXPECT_EQ(spec->serving().target_qps(), 250);
  EXPECT_EQ(spec->serving().latency_bound_ms(), 20);
  EXPECT_EQ(spec->serving().min_duration_seconds(), 3);
  EXPECT_FALSE(spec->serving().has_min_queries()) << "not given: left to the default";
  f.qps = {100, 200, 400};
  spec = ApplySpecFlags(FromFile(), f);
  ASSERT_TRUE(spec.ok()) << spec.status();
  EXPECT_EQ(spec->serving().target_qps(), 0);
  EXPECT_THAT(spec->serving().qps_sweep(), ::testing::ElementsAre(100, 200, 400));
  EXPECT_FALSE(ApplySpecFlags(FromFile(), SpecFlags())->has_serving()) << "no serving flag: no section";
}

TEST(SpecFlagsTest, ParsedFlagsAreNotedAsGiven) {
  CLI::App app;
  SpecFlags f;
  AddSpecFlags(&app, &f);
  const char* argv[] = {"submit", "--min-steps", "0", "--seed", "9", "-b", "8,16"};
  app.parse(7, const_cast<char**>(argv));
  NoteGivenFlags(app, &f);
  EXPECT_THAT(f.given, ::testing::UnorderedElementsAre("--min-steps", "--seed"));
  auto spec = ApplySpecFlags(FromFile(), f);
  ASSERT_TRUE(spec.ok());
  EXPECT_EQ(spec->train().min_steps(), 0);
  EXPECT_EQ(spec->seed(), 9u);
  EXPECT_THAT(spec->batch_sizes(), ::testing::ElementsAre(8, 16));
}

}  // namespace
}  // namespace hetbench::client
