// Split execution of a layer stack in stages: the same loss curve as the
// single-device run on the same seed, and the per-stage breakdown reaches
// the task's result.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "agent/gang/split_step.h"
#include "agent/executors/torch_executor.h"
#include "agent/models/models.h"
#include "agent/models/workload.h"
#include "common/job_spec.h"

namespace hetbench::agent {
namespace {

using ::testing::HasSubstr;

ImageDataset Rows(int64_t n) {
  torch::manual_seed(9);
  ImageDataset ds;
  ds.train = {torch::randn({n, 784}), torch::arange(n, torch::kInt64).remainder(10)};
  ds.test = {torch::randn({16, 784}), torch::arange(16, torch::kInt64).remainder(10)};
  return ds;
}

v1::SplitSpec TwoStages(const std::string& first, const std::string& second) {
  v1::SplitSpec split;
  split.add_stages()->set_layers(first);
  split.add_stages()->set_layers(second);
  return split;
}

v1::Device Cpu(const std::string& id) {
  v1::Device d;
  d.set_id(id);
  d.set_kind(v1::DEVICE_KIND_CPU);
  d.set_cores(1);
  return d;
}

// Trains `model` for `steps` batches of 16, whole or split by `stages` over
// `devices` (clearing the gradients as `clear` says), from one seed (the
// dropout draws included); returns the loss of every step, the final
// parameters and each split step's stage times.
struct Curve {
  std::vector<double> losses;
  std::vector<torch::Tensor> parameters;
  std::vector<std::vector<StageTimes>> times;
};
Curve TrainCurve(const std::string& model, const v1::JobSpec& spec, const ImageDataset& ds, int steps,
                 const v1::SplitSpec* stages, const std::vector<v1::Device>& devices,
                 Workload::ClearGradients clear = Workload::ClearGradients::kBeforeForward) {
  Curve out;
  auto w = MakeWorkload(model, spec, ds);
  EXPECT_TRUE(w.ok()) << w.status();
  if (!w.ok()) return out;
  (*w)->SetTraining(true);
  absl::StatusOr<std::vector<SplitStagePlan>> plan = absl::UnknownError("not split");
  if (stages != nullptr) {
    plan = PlanSplit(*stages, (*(*w)->Layers())->size(), devices);
    EXPECT_TRUE(plan.ok()) << plan.status();
    if (!plan.ok()) return out;
  }
  torch::manual_seed(11);  // the dropout draws
  for (int k = 0; k < steps; ++k) {
    const torch::Tensor x = ds.train.images.slice(0, 16 * k, 16 * k + 16);
    const torch::Tensor y = ds.train.labels.slice(0, 16 * k, 16 * k + 16);
    std::vector<StageTimes> times(devices.size());
    torch::Tensor loss = stages == nullptr ? (*w)->TrainStep(x, y)
                                           : (*w)->TrainStepWith(
                                                 [&] {
                                                   return SplitForwardBackward(
                                                       *(*w)->Layers(), *plan, x, y,
                                                       [&](const torch::Tensor& o, const torch::Tensor& a,
                                                           const torch::Tensor& b) { return (*w)->Loss(o, a, b); },
                                                       times.data());
                                                 },
                                                 clear);
    out.losses.push_back(loss.item<double>());
    out.times.push_back(std::move(times));
  }
  out.parameters = (*w)->Parameters();
  return out;
}

// The split run's losses equal the whole run's to 1e-6 at every step, and
// its final parameters are allclose.
void ExpectSameCurve(const Curve& whole, const Curve& split) {
  ASSERT_EQ(whole.losses.size(), split.losses.size());
  for (size_t k = 0; k < whole.losses.size(); ++k) EXPECT_NEAR(split.losses[k], whole.losses[k], 1e-6) << "step " << k;
  ASSERT_EQ(whole.parameters.size(), split.parameters.size());
  for (size_t i = 0; i < whole.parameters.size(); ++i) {
    EXPECT_TRUE(torch::allclose(split.parameters[i], whole.parameters[i], 1e-5, 1e-6)) << "tensor " << i;
  }
}

// Acceptance: mlp split in two (layers 0-2 | 3-6) follows the single-device
// loss curve step for step (dropout included: the same draws in the same
// order), to 1e-6, over 20 steps; so does it when the gradients are cleared
// after the optimizer step, as a later stage across agents clears them while
// it waits for the next activation.
TEST(SplitTest, ASplitMlpFollowsTheSingleDeviceLossCurve) {
  const ImageDataset ds = Rows(320);
  const v1::JobSpec spec = WithDefaults(v1::JobSpec());
  const v1::SplitSpec two = TwoStages("0-2", "3-");
  const std::vector<v1::Device> devices = {Cpu("cpu0"), Cpu("cpu1")};
  const Curve whole = TrainCurve("mlp", spec, ds, 20, nullptr, devices);
  const Curve split = TrainCurve("mlp", spec, ds, 20, &two, devices);
  ExpectSameCurve(whole, split);
  EXPECT_LT(whole.losses.back(), whole.losses.front()) << "it learns";
  for (const std::vector<StageTimes>& t : split.times) {
    EXPECT_GT(t[1].forward_ns, 0) << "the second stage was timed";
    EXPECT_EQ(t[0].transfer_bytes, 2 * 16 * 512 * 4) << "the activation forward and its gradient back";
  }
  ExpectSameCurve(whole, TrainCurve("mlp", spec, ds, 20, &two, devices, Workload::ClearGradients::kAfterStep));
}

// The quantum variant split as cpu | qpu-sim | cpu (the classical encoder,
// the simulated circuit layer, the classical head) follows the same loss
// curve as the whole qnn on one device.
TEST(SplitTest, ASplitQnnAcrossCpuAndQpuSimFollowsTheSingleDeviceLossCurve) {
  const ImageDataset ds = Rows(160);
  v1::JobSpec base;
  base.mutable_qpu()->set_qubits(4);
  const v1::JobSpec spec = WithDefaults(base);
  v1::SplitSpec three;
  three.add_stages()->set_layers("0");
  three.add_stages()->set_layers("1");
  three.add_stages()->set_layers("2-");
  v1::Device qpu = Cpu("qpu0");
  qpu.set_kind(v1::DEVICE_KIND_QPU_SIM);
  const std::vector<v1::Device> devices = {Cpu("cpu0"), qpu, Cpu("cpu0")};
  const Curve whole = TrainCurve("qnn", spec, ds, 10, nullptr, devices);
  const Curve split = TrainCurve("qnn", spec, ds, 10, &three, devices);
  ExpectSameCurve(whole, split);
  for (const std::vector<StageTimes>& t : split.times) {
    EXPECT_GT(t[1].forward_ns, 0) << "the quantum stage was timed";
    EXPECT_GT(t[1].backward_ns, 0) << "and its gradient";
  }
}

TEST(SplitTest, StagesMustCoverTheStackInOrder) {
  EXPECT_THAT(PlanSplit(TwoStages("0-2", "3-9"), 7, {Cpu("a"), Cpu("b")}).status().message(),
              HasSubstr("the model has layers 0-6"));
  EXPECT_THAT(PlanSplit(TwoStages("0-2", "3-4"), 7, {Cpu("a"), Cpu("b")}).status().message(),
              HasSubstr("the last stage must reach the last layer"));
  EXPECT_THAT(PlanSplit(TwoStages("0-2", "3-"), 7, {Cpu("a")}).status().message(), HasSubstr("2 stages but 1 devices"));
}

// The executor runs a split task (Assign.stage_device_ids) and reports each
// stage: layers, device, forward/backward/transfer medians, bytes, idle.
TEST(SplitTest, TheExecutorReportsEachStage) {
  const ImageDataset ds = Rows(256);
  TorchExecutorConfig config;
  config.calibrate = false;
  config.data_dir = HETBENCH_DATA_DIR;
  config.make_workload = [&](const std::string& m, const v1::JobSpec& s, const ImageDataset&) {
    return MakeWorkload(m, s, ds);
  };
  TorchExecutor exec(config);
  v1::Assign a;
  a.set_task_id("t");
  a.set_batch_size(32);
  a.set_model("mlp");
  a.add_stage_device_ids("cpu1");
  v1::JobSpec spec;
  spec.mutable_train()->set_min_steps(5);
  spec.mutable_train()->set_warmup_steps(1);
  spec.mutable_train()->set_min_duration_seconds(0);
  spec.mutable_inference()->set_max_batches(1);
  *spec.mutable_split() = TwoStages("0-3", "4-");
  *a.mutable_spec() = WithDefaults(spec);
  TaskControl control(SampleCapacity(a), SteadyNowNs());
  control.stage_devices = {Cpu("cpu1")};
  auto r = exec.Run(a, Cpu("cpu0"), &control);
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_EQ(r->split_size(), 2);
  EXPECT_EQ(r->split(0).layers(), "0-3");
  EXPECT_EQ(r->split(1).layers(), "4-6");
  EXPECT_EQ(r->split(0).device_id(), "cpu0");
  EXPECT_EQ(r->split(1).device_id(), "cpu1");
  EXPECT_EQ(r->split(1).transfer_bytes(), 2 * 32 * 512 * 4);
  for (const v1::SplitStageResult& s : r->split()) {
    EXPECT_GT(s.forward_ns(), 0);
    EXPECT_GT(s.backward_ns(), 0);
    EXPECT_GT(s.step_ns(), s.forward_ns() + s.backward_ns());
    EXPECT_GT(s.idle_ns(), 0) << "without micro-batches each stage waits for the other";
  }
}

}  // namespace
}  // namespace hetbench::agent
