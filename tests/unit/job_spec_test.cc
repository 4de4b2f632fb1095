#include "common/job_spec.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "absl/strings/str_cat.h"

namespace hetbench {
namespace {

using ::testing::HasSubstr;

v1::JobSpec Valid() { return WithDefaults(v1::JobSpec()); }

TEST(JobSpecTest, DefaultsAreFilledAndValid) {
  v1::JobSpec s = Valid();
  ASSERT_EQ(s.models_size(), 1);
  EXPECT_EQ(s.models(0), "mlp");
  EXPECT_EQ(s.name(), "mlp");
  EXPECT_FALSE(s.layers().enabled());
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
  v1::JobSpec s;
  s.set_model("resnet999");
  absl::Status st = ValidateJobSpec(WithDefaults(s));
  EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(st.message()), HasSubstr("model = \"resnet999\": unknown model; use one of: mlp"));
}

TEST(JobSpecTest, SeveralModelsAreCheckedOneByOne) {
  v1::JobSpec s;
  for (const char* m : {"mlp", "cnn", "rnn", "lstm", "autoencoder"}) s.add_models(m);
  s = WithDefaults(s);
  EXPECT_TRUE(ValidateJobSpec(s).ok()) << ValidateJobSpec(s);
  EXPECT_EQ(s.name(), "mlp+cnn+rnn+lstm+autoencoder");

  s.add_models("cnn");
  s.add_models("gpt5");
  const std::string msg(ValidateJobSpec(s).message());
  EXPECT_THAT(msg, HasSubstr("models[5] = \"cnn\": repeats models[1]; list each model once"));
  EXPECT_THAT(msg, HasSubstr("models[6] = \"gpt5\": unknown model; use one of: mlp, cnn"));

  v1::JobSpec both;
  both.set_model("mlp");
  both.add_models("cnn");
  EXPECT_THAT(std::string(ValidateJobSpec(WithDefaults(both)).message()),
              HasSubstr("model = \"mlp\" and models: both set"));
}

TEST(JobSpecTest, TasksCountModelsTargetsAndBatchSizes) {
  v1::JobSpec s;
  for (int i = 1; i <= 32; ++i) s.add_batch_sizes(i);
  for (int i = 0; i < 4; ++i) s.add_targets()->set_device_kind(v1::DEVICE_KIND_CPU);
  for (const char* m : {"mlp", "cnn", "rnn", "lstm", "autoencoder", "conv6", "vgg16", "resnet18", "transformer"}) {
    s.add_models(m);
  }
  EXPECT_THAT(std::string(ValidateJobSpec(WithDefaults(s)).message()),
              HasSubstr("models x targets x batch_sizes = 1152 tasks: at most 1024"));
}

TEST(JobSpecTest, TorchScriptNeedsAPathAndAShape) {
  v1::JobSpec s;
  s.add_models("torchscript");
  EXPECT_THAT(std::string(ValidateJobSpec(WithDefaults(s)).message()),
              HasSubstr("torchscript.path: empty: the model \"torchscript\" needs the .pt file's path on the agent"));
  s.mutable_torchscript()->set_path("/models/net.pt");
  s.mutable_torchscript()->add_input_shape(1);
  s.mutable_torchscript()->add_input_shape(0);
  EXPECT_THAT(std::string(ValidateJobSpec(WithDefaults(s)).message()),
              HasSubstr("torchscript.input_shape[1] = 0: must be in [1, 1000000]"));
  s.mutable_torchscript()->set_input_shape(1, 784);
  EXPECT_TRUE(ValidateJobSpec(WithDefaults(s)).ok());

  v1::JobSpec stray = Valid();
  stray.mutable_torchscript()->set_path("/models/net.pt");
  EXPECT_THAT(std::string(ValidateJobSpec(stray).message()),
              HasSubstr("torchscript: set, but models does not list \"torchscript\""));
}

TEST(JobSpecTest, QuantumModelsGetDefaultsAndLimits) {
  v1::JobSpec qnn;
  qnn.add_models("qnn");
  qnn = WithDefaults(qnn);
  EXPECT_EQ(qnn.qpu().qubits(), 8);
  EXPECT_EQ(qnn.qpu().layers(), 2);
  v1::JobSpec qsim;
  qsim.add_models("qsim");
  qsim = WithDefaults(qsim);
  EXPECT_EQ(qsim.qpu().qubits(), 20);
  EXPECT_EQ(qsim.qpu().depth(), 10);
  EXPECT_EQ(qsim.qpu().precision(), "complex64");
  EXPECT_TRUE(ValidateJobSpec(qsim).ok());
  qsim.mutable_qpu()->set_qubits(60);
  qsim.mutable_qpu()->set_precision("complex32");
  const std::string msg(ValidateJobSpec(qsim).message());
  EXPECT_THAT(msg, HasSubstr("qpu.qubits = 60: must be in [1, 34]"));
  EXPECT_THAT(msg, HasSubstr("qpu.precision = \"complex32\": use complex64 or complex128"));
}

TEST(JobSpecTest, LayerProfilingGetsADefaultStepCount) {
  v1::JobSpec s;
  s.mutable_layers()->set_enabled(true);
  EXPECT_EQ(WithDefaults(s).layers().steps(), 20);
  s.mutable_layers()->set_steps(-3);
  EXPECT_THAT(std::string(ValidateJobSpec(WithDefaults(s)).message()), HasSubstr("layers.steps = -3: must be in"));
  s.mutable_layers()->set_steps(5);
  s.mutable_layers()->set_energy_seconds(120);
  EXPECT_THAT(std::string(ValidateJobSpec(WithDefaults(s)).message()),
              HasSubstr("layers.energy_seconds = 120: must be in [0, 60]"));
  s.mutable_layers()->set_energy_seconds(0.5);
  EXPECT_TRUE(ValidateJobSpec(WithDefaults(s)).ok());
  s.mutable_layers()->set_enabled(false);
  EXPECT_THAT(std::string(ValidateJobSpec(WithDefaults(s)).message()),
              HasSubstr("layers.energy_seconds = 0.5: needs layers.enabled (CLI --layers)"));
}

TEST(JobSpecTest, TheOldExecutorSpellingQsimBecomesStatevectorWithANotice) {
  v1::JobSpec s = Valid();
  s.add_targets()->set_executor("qsim");
  s.mutable_split()->add_stages()->mutable_target()->set_executor("qsim");
  s.mutable_split()->add_stages()->mutable_target()->set_executor("torch");
  const std::vector<std::string> notices = UpgradeOldSpellings(&s);
  ASSERT_EQ(notices.size(), 2u);
  EXPECT_EQ(notices[0], absl::StrCat("targets[", s.targets_size() - 1,
                                     "].executor: \"qsim\" is now spelled \"statevector\" (accepted)"));
  EXPECT_THAT(notices[1], HasSubstr("split.stages[0].target.executor"));
  EXPECT_EQ(s.targets(s.targets_size() - 1).executor(), "statevector");
  EXPECT_EQ(s.split().stages(1).target().executor(), "torch");
  EXPECT_TRUE(UpgradeOldSpellings(&s).empty()) << "already upgraded";
  EXPECT_TRUE(IsKnownExecutor("statevector"));
  EXPECT_FALSE(IsKnownExecutor("qsim")) << "the model's name is not an executor's";
}

TEST(JobSpecTest, ThePythonExecutorTakesOnlyTheModelsTheRunnerImplements) {
  v1::JobSpec s = Valid();
  s.clear_models();
  s.add_models("mlp");
  s.add_models("vgg16");
  auto* t = s.add_targets();
  t->set_device_kind(v1::DEVICE_KIND_CPU);
  t->set_executor("python");
  const std::string msg(ValidateJobSpec(WithDefaults(s)).message());
  EXPECT_THAT(msg, HasSubstr("executor = \"python\" with model \"vgg16\": the Python runner implements mlp, cnn, rnn, "
                             "lstm, autoencoder; run vgg16 with the torch executor"));
  EXPECT_THAT(msg, Not(HasSubstr("\"mlp\":")));
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

v1::PhaseResult Phase(v1::Phase phase, int64_t count, double window_s, double p50, double iqr) {
  v1::PhaseResult p;
  p.set_phase(phase);
  p.mutable_stats()->set_count(count);
  p.mutable_stats()->set_window_seconds(window_s);
  p.mutable_stats()->set_p50_ns(p50);
  p.mutable_stats()->set_iqr_ns(iqr);
  return p;
}

TEST(ValidityTest, ValidOnlyWithEnoughStepsEnoughTimeAndLowSpread) {
  v1::JobSpec spec = Valid();  // min duration 1 s, max IQR/median 0.25
  EXPECT_DOUBLE_EQ(spec.validity().max_iqr_over_median(), 0.25);
  v1::PhaseResult good = Phase(v1::PHASE_TRAIN, 459, 3.2, 8e6, 1e6);
  JudgeValidity(spec, 459, &good);
  EXPECT_TRUE(good.valid());
  EXPECT_TRUE(good.invalid_reasons().empty());

  v1::PhaseResult short_run = Phase(v1::PHASE_TRAIN, 100, 0.4, 8e6, 1e6);
  JudgeValidity(spec, 459, &short_run);
  EXPECT_FALSE(short_run.valid());
  ASSERT_EQ(short_run.invalid_reasons_size(), 2);
  EXPECT_EQ(short_run.invalid_reasons(0), "only 100 of 459 steps measured");
  EXPECT_THAT(short_run.invalid_reasons(1), HasSubstr("below train.min_duration_seconds = 1"));

  v1::PhaseResult unknown_aim = Phase(v1::PHASE_TRAIN, 459, 3.2, 8e6, 1e6);  // no min_train_steps from the agent
  JudgeValidity(spec, 0, &unknown_aim);
  EXPECT_FALSE(unknown_aim.valid());
  ASSERT_EQ(unknown_aim.invalid_reasons_size(), 1);
  EXPECT_THAT(unknown_aim.invalid_reasons(0), HasSubstr("did not say how many training steps it aimed for"));

  v1::PhaseResult noisy = Phase(v1::PHASE_INFER, 79, 0.2, 2e6, 1e6);  // infer has no duration minimum
  JudgeValidity(spec, 79, &noisy);
  EXPECT_FALSE(noisy.valid());
  ASSERT_EQ(noisy.invalid_reasons_size(), 1);
  EXPECT_THAT(noisy.invalid_reasons(0), HasSubstr("too noisy: IQR/median = 0.500 > validity.max_iqr_over_median"));
}

TEST(JobSpecTest, PowerAndCostFieldsAreChecked) {
  v1::JobSpec s = Valid();
  (*s.mutable_cost()->mutable_usd_per_hour())["gpu"] = 2.48;
  (*s.mutable_cost()->mutable_usd_per_hour())["label:pool=spot"] = 0.9;
  s.mutable_cost()->set_electricity_usd_per_kwh(0.15);
  s.mutable_power()->set_idle_baseline_seconds(5);
  EXPECT_TRUE(ValidateJobSpec(s).ok()) << ValidateJobSpec(s);
  (*s.mutable_cost()->mutable_usd_per_hour())["fpga"] = 1;
  (*s.mutable_cost()->mutable_usd_per_hour())["cpu"] = -1;
  s.mutable_power()->set_idle_baseline_seconds(601);
  const std::string msg(ValidateJobSpec(s).message());
  EXPECT_THAT(msg, HasSubstr("cost.usd_per_hour[\"fpga\"]: unknown key"));
  EXPECT_THAT(msg, HasSubstr("cost.usd_per_hour[\"cpu\"] = -1: must be in [0, 1000000]"));
  EXPECT_THAT(msg, HasSubstr("power.idle_baseline_seconds = 601"));
}

TEST(ValidityTest, ExpectedInferenceBatchesCoverTheTestSetOrTheCap) {
  v1::JobSpec spec = Valid();
  EXPECT_EQ(ExpectedInferenceBatches(spec, 128, 10000), 79);
  spec.mutable_inference()->set_max_batches(5);
  EXPECT_EQ(ExpectedInferenceBatches(spec, 128, 10000), 5);
  spec.mutable_validity()->set_max_iqr_over_median(0);
  EXPECT_THAT(std::string(ValidateJobSpec(spec).message()), HasSubstr("validity.max_iqr_over_median = 0"));
}


}  // namespace
}  // namespace hetbench

namespace hetbench {
namespace {

// Found by fuzzing (tests/fuzz/corpus/spec/crash-nul-in-name.yaml): free text
// must be printable UTF-8, or it does not survive YAML, logs and protobuf.
TEST(JobSpecTest, ControlCharactersAndInvalidUtf8AreRefusedByField) {
  v1::JobSpec spec = WithDefaults({});
  spec.set_name(std::string("a\0b", 3));
  EXPECT_THAT(std::string(ValidateJobSpec(spec).message()),
              ::testing::HasSubstr("name: contains a control character or invalid UTF-8"));
  spec.set_name("caf\xc3\xa9 \xe2\x9c\x93");  // é and a check mark: fine
  EXPECT_TRUE(ValidateJobSpec(spec).ok()) << ValidateJobSpec(spec);
  spec.set_name("bad \xd4x");  // a lead byte without its continuation
  EXPECT_FALSE(ValidateJobSpec(spec).ok());
  spec.set_name("overlong \xc0\xaf");
  EXPECT_FALSE(ValidateJobSpec(spec).ok());
  spec.set_name("ok");
  spec.mutable_targets(0)->set_agent_id("node\n1");
  EXPECT_THAT(std::string(ValidateJobSpec(spec).message()), ::testing::HasSubstr("targets[0].agent_id: contains"));
}


TEST(JobSpecTest, CountsAreCheckedBeforeEntriesSoAHugeListIsRefusedInLinearTime) {
  v1::JobSpec spec = WithDefaults(v1::JobSpec());
  spec.clear_batch_sizes();
  for (int i = 0; i < 1'000'000; ++i) spec.add_batch_sizes(i % 7);  // repeats and zeros: never reported
  spec.clear_models();
  for (int i = 0; i < 100; ++i) spec.add_models("mlp");
  const absl::Status s = ValidateJobSpec(spec);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(s.message(),
            "job spec: models: 100 entries: at most 32 allowed; batch_sizes: 1000000 entries: at most 64 allowed");
}


// Data-parallel and split specs: defaults, and every bad field named with its fix.
TEST(JobSpecTest, ParallelGetsDefaultsAndBadFieldsAreNamed) {
  v1::JobSpec in;
  in.mutable_parallel()->add_devices(1);
  in.mutable_parallel()->add_devices(2);
  v1::JobSpec s = WithDefaults(in);
  EXPECT_EQ(s.parallel().strategy(), "data");
  EXPECT_DOUBLE_EQ(s.parallel().gang_timeout_seconds(), 600);
  EXPECT_DOUBLE_EQ(s.parallel().collective_timeout_seconds(), 30);
  EXPECT_TRUE(ValidateJobSpec(s).ok()) << ValidateJobSpec(s);

  s.mutable_parallel()->add_devices(0);
  s.mutable_parallel()->add_devices(2);
  s.mutable_parallel()->set_strategy("pipeline");
  s.add_models("qsim");
  const std::string m(ValidateJobSpec(s).message());
  EXPECT_THAT(m, HasSubstr("parallel.devices[2] = 0: must be in [1, 64]"));
  EXPECT_THAT(m, HasSubstr("parallel.devices[3] = 2: repeats parallel.devices[1]"));
  EXPECT_THAT(m, HasSubstr("parallel.strategy = \"pipeline\": only \"data\""));
  EXPECT_THAT(m, HasSubstr("parallel: model \"qsim\" cannot train data-parallel"));
}

TEST(JobSpecTest, ParallelRanksCountTowardsTheTaskLimit) {
  v1::JobSpec in;
  for (int b = 1; b <= 20; ++b) in.add_batch_sizes(b);
  in.mutable_parallel()->add_devices(32);
  in.mutable_parallel()->add_devices(64);
  const std::string m(ValidateJobSpec(WithDefaults(in)).message());
  EXPECT_THAT(m, HasSubstr("models x targets x batch_sizes x sum(parallel.devices) = 1920 tasks: at most 1024"));
}

TEST(JobSpecTest, RepeatsDefaultToOneAreBoundedAndCountTowardsTheTaskLimit) {
  v1::JobSpec in;
  EXPECT_EQ(WithDefaults(in).repeats(), 1) << "the effective spec states it";
  in.set_repeats(50);
  EXPECT_TRUE(ValidateJobSpec(WithDefaults(in)).ok());
  in.set_repeats(51);
  EXPECT_THAT(std::string(ValidateJobSpec(WithDefaults(in)).message()), HasSubstr("repeats = 51: must be in [1, 50]"));
  in.set_repeats(-2);
  EXPECT_THAT(std::string(ValidateJobSpec(WithDefaults(in)).message()), HasSubstr("repeats = -2"));
  in.set_repeats(30);
  for (int b = 1; b <= 40; ++b) in.add_batch_sizes(b);
  EXPECT_THAT(std::string(ValidateJobSpec(WithDefaults(in)).message()),
              HasSubstr("models x targets x batch_sizes x repeats = 1200 tasks: at most 1024"));
}

TEST(JobSpecTest, SplitStagesMustBeContiguousFromLayerZero) {
  v1::JobSpec in;
  auto stage = [&](const std::string& layers) {
    v1::SplitStage* st = in.mutable_split()->add_stages();
    st->set_layers(layers);
    st->mutable_target()->set_device_kind(v1::DEVICE_KIND_CPU);
  };
  stage("0-3");
  stage("4-");
  EXPECT_TRUE(ValidateJobSpec(WithDefaults(in)).ok());
  in.mutable_split()->mutable_stages(1)->set_layers("5-");
  EXPECT_THAT(std::string(ValidateJobSpec(WithDefaults(in)).message()),
              HasSubstr("split.stages[1].layers = \"5-\": must start at layer 4"));
  in.mutable_split()->mutable_stages(0)->set_layers("0-");
  EXPECT_THAT(std::string(ValidateJobSpec(WithDefaults(in)).message()),
              HasSubstr("an open range (\"N-\") must be the last stage"));
  in.mutable_split()->mutable_stages(0)->set_layers("three");
  EXPECT_THAT(std::string(ValidateJobSpec(WithDefaults(in)).message()), HasSubstr("not a layer range"));
  in.mutable_split()->mutable_stages(0)->set_layers("0-3");
  in.mutable_split()->mutable_stages(1)->set_layers("4-");
  in.mutable_parallel()->add_devices(2);
  EXPECT_THAT(std::string(ValidateJobSpec(WithDefaults(in)).message()), HasSubstr("split and parallel: both set"));
}

TEST(JobSpecTest, ASplitAcrossAgentsIsAGangOfItsStagesWithTimeouts) {
  v1::JobSpec in;
  in.mutable_split()->set_across_agents(true);
  EXPECT_THAT(std::string(ValidateJobSpec(WithDefaults(in)).message()),
              HasSubstr("split.across_agents and its timeouts need split.stages"));
  for (const char* layers : {"0-2", "3-"}) {
    v1::SplitStage* st = in.mutable_split()->add_stages();
    st->set_layers(layers);
    st->mutable_target()->set_device_kind(v1::DEVICE_KIND_CPU);
  }
  const v1::JobSpec effective = WithDefaults(in);
  EXPECT_TRUE(ValidateJobSpec(effective).ok()) << ValidateJobSpec(effective);
  EXPECT_DOUBLE_EQ(effective.split().gang_timeout_seconds(), 600);
  EXPECT_DOUBLE_EQ(effective.split().collective_timeout_seconds(), 30);
  in.mutable_split()->set_collective_timeout_seconds(0.5);
  EXPECT_THAT(std::string(ValidateJobSpec(WithDefaults(in)).message()),
              HasSubstr("split.collective_timeout_seconds = 0.5: must be in [1, 3600]"));
  in.mutable_split()->set_collective_timeout_seconds(30);
  in.mutable_split()->clear_stages();
  for (int i = 0; i < 8; ++i) {
    v1::SplitStage* st = in.mutable_split()->add_stages();
    st->set_layers(i < 7 ? std::to_string(i) : "7-");
    st->mutable_target()->set_device_kind(v1::DEVICE_KIND_CPU);
  }
  for (int b = 1; b <= 64; ++b) in.add_batch_sizes(b);
  for (const char* m : {"mlp", "cnn", "qnn"}) in.add_models(m);
  EXPECT_THAT(std::string(ValidateJobSpec(WithDefaults(in)).message()),
              HasSubstr("= 1536 tasks: at most 1024"))
      << "3 models x 64 batch sizes x a task per stage (8)";
}

TEST(JobSpecTest, LayerRangesParse) {
  EXPECT_EQ(ParseLayerRange("2")->begin, 2);
  EXPECT_EQ(ParseLayerRange("2")->end, 3);
  EXPECT_EQ(ParseLayerRange("0-3")->end, 4);
  EXPECT_EQ(ParseLayerRange("4-")->end, -1);
  EXPECT_FALSE(ParseLayerRange("3-1").ok());
  EXPECT_FALSE(ParseLayerRange("-2").ok());
  EXPECT_FALSE(ParseLayerRange("").ok());
}

}  // namespace
}  // namespace hetbench
