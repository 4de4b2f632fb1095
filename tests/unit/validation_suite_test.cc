// The agent's validation suite on real devices of this machine (the CPU and
// the simulator), with time boxes, a hung test, fake power sensors and an
// unreachable device kind.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <chrono>
#include <thread>

#include "absl/synchronization/notification.h"
#include "absl/time/time.h"
#include "agent/power/power_sampler.h"
#include "agent/validation/suite.h"
#include "common/clock.h"
#include "common/job_spec.h"
#include "common/validate_spec.h"

namespace hetbench::agent {
namespace {

using ::testing::HasSubstr;

// Tests that check what is measured give each test a box of 30 s: under the
// parallel suite's load a 2 s box ran out after 2 of 3 repetitions of
// memory_bandwidth (CI, stop 78). Boxes themselves are tested on a driven clock.
constexpr double kRoomyBox = 30;

v1::Assign SuiteTask(std::vector<std::string> tests, double box = kRoomyBox, int reps = 3) {
  v1::Assign a;
  a.set_task_id("job-000001-t0");
  a.set_batch_size(32);
  v1::JobSpec spec;
  spec.mutable_validate()->set_level("quick");
  spec.mutable_validate()->set_time_box_seconds(box);
  spec.mutable_validate()->set_repetitions(reps);
  for (auto& t : tests) spec.mutable_validate()->add_tests(t);
  spec.set_threads(1);
  *a.mutable_spec() = WithDefaults(spec);
  return a;
}

v1::Device Cpu() {
  v1::Device d;
  d.set_id("cpu0");
  d.set_kind(v1::DEVICE_KIND_CPU);
  d.set_model("Test CPU");
  d.set_cores(2);
  return d;
}

const v1::ValidationTest& TestOf(const v1::TaskResult& r, const std::string& name) {
  for (const auto& t : r.validation().tests()) {
    if (t.name() == name) return t;
  }
  static const v1::ValidationTest none;
  ADD_FAILURE() << "no test " << name;
  return none;
}

v1::TaskResult RunSuite(ValidationExecutor& e, const v1::Assign& a, const v1::Device& d) {
  TaskControl control(16, SteadyNowNs());
  auto r = e.Run(a, d, &control);
  EXPECT_TRUE(r.ok()) << r.status();
  return r.ok() ? *r : v1::TaskResult();
}

TEST(ValidationSuiteTest, TheCpuSuiteMeasuresAndItsFingerprintRepeatsBitForBit) {
  ValidationConfig config;
  config.agent_version = "test";
  ValidationExecutor e(config);
  const v1::Assign a = SuiteTask({"matmul", "memory_bandwidth", "train_mlp", "infer_mlp"});
  const v1::TaskResult r = RunSuite(e, a, Cpu());
  EXPECT_EQ(r.validation().sku(), "cpu|Test CPU|-|2|1|test");
  ASSERT_EQ(r.validation().tests_size(), 4);
  for (const auto& t : r.validation().tests()) {
    EXPECT_EQ(t.outcome(), v1::TEST_OUTCOME_MEASURED) << t.name() << ": " << t.reason();
    EXPECT_EQ(t.values_size(), 3) << t.name();
    for (double v : t.values()) EXPECT_GT(v, 0) << t.name();
  }
  EXPECT_EQ(TestOf(r, "matmul").unit(), "GFLOP/s");
  EXPECT_THAT(TestOf(r, "matmul").detail(), HasSubstr("n=512 float32"));
  ASSERT_EQ(TestOf(r, "train_mlp").loss_bits_size(), 8);
  const v1::TaskResult again = RunSuite(e, SuiteTask({"train_mlp"}), Cpu());
  EXPECT_EQ(TestOf(again, "train_mlp").loss_bits().size(), 8);
  for (int i = 0; i < 8; ++i) {
    EXPECT_EQ(TestOf(again, "train_mlp").loss_bits(i), TestOf(r, "train_mlp").loss_bits(i)) << "step " << i;
  }
}

// Time boxes on a driven clock: memory_bandwidth hangs until released, and the
// test moves the box clock past the box and its grace while it hangs; matmul
// finds its box already spent when it starts. Measurements still use the
// steady clock; `seconds` is the box clock's.
TEST(ValidationSuiteTest, AHungTestFailsAtItsBoxAndTheOthersStillRun) {
  SimulatedClock clock;
  auto hung = std::make_shared<absl::Notification>(), release = std::make_shared<absl::Notification>();
  ValidationConfig config;
  config.box_clock = &clock;
  config.before_test = [&clock, hung, release](const std::string& test) {
    if (test == "matmul") clock.AdvanceNs(1'100'000'000);  // past its 1 s box, within the grace
    if (test == "memory_bandwidth") {
      hung->Notify();
      release->WaitForNotificationWithTimeout(absl::Seconds(60));  // (released at the end)
    }
  };
  std::thread mover([&clock, hung] {
    if (hung->WaitForNotificationWithTimeout(absl::Seconds(60))) clock.AdvanceNs(2'500'000'000);  // box + grace passed
  });
  ValidationExecutor e(config);
  const v1::TaskResult r = RunSuite(e, SuiteTask({"matmul", "memory_bandwidth", "infer_mlp"}, /*box=*/1), Cpu());
  mover.join();
  release->Notify();
  EXPECT_EQ(TestOf(r, "matmul").outcome(), v1::TEST_OUTCOME_TIMED_OUT);
  EXPECT_EQ(TestOf(r, "matmul").reason(), "0 of 3 repetitions done");
  EXPECT_DOUBLE_EQ(TestOf(r, "matmul").seconds(), 1.1);
  EXPECT_EQ(TestOf(r, "memory_bandwidth").outcome(), v1::TEST_OUTCOME_TIMED_OUT);
  EXPECT_THAT(TestOf(r, "memory_bandwidth").reason(), HasSubstr("abandoned"));
  EXPECT_DOUBLE_EQ(TestOf(r, "memory_bandwidth").seconds(), 2.5) << "given up at the box and its grace, not later";
  EXPECT_EQ(TestOf(r, "infer_mlp").outcome(), v1::TEST_OUTCOME_MEASURED) << TestOf(r, "infer_mlp").reason();
  EXPECT_DOUBLE_EQ(TestOf(r, "infer_mlp").seconds(), 0) << "the box clock did not move while it ran";
  EXPECT_EQ(TestOf(r, "infer_mlp").values_size(), 3);
}

// A sensor whose energy counter runs at `counter_watts` while it reports `watts`.
class FakeSensor final : public PowerSensor {
 public:
  FakeSensor(double watts, double counter_watts) : watts_(watts), counter_watts_(counter_watts) {
    info_.set_name("fake:cpu0");
    info_.set_source(v1::POWER_SOURCE_HWMON);
    info_.set_device_id("cpu0");
    info_.set_available(true);
    info_.set_has_energy_counter(true);
    info_.set_update_period_seconds(0.001);
  }
  const v1::SensorInfo& info() const override { return info_; }
  absl::StatusOr<PowerReading> Read() override {
    const double t = static_cast<double>(SteadyNowNs() - start_) * 1e-9;
    return PowerReading{watts_, counter_watts_ * t};
  }

 private:
  v1::SensorInfo info_;
  double watts_, counter_watts_;
  int64_t start_ = SteadyNowNs();
};

v1::ValidationTest PowerTest(double watts, double counter_watts) {
  std::vector<std::unique_ptr<PowerSensor>> sensors;
  sensors.push_back(std::make_unique<FakeSensor>(watts, counter_watts));
  PowerSampler sampler(std::move(sensors), 50);
  sampler.Start();
  ValidationConfig config;
  config.sampler = &sampler;
  ValidationExecutor e(config);
  const v1::TaskResult r = RunSuite(e, SuiteTask({"power_sensor"}, /*box=*/1.6, /*reps=*/4), Cpu());
  sampler.Stop();
  return TestOf(r, "power_sensor");
}

TEST(ValidationSuiteTest, ASensorWhoseCounterDisagreesWithItsPowerFails) {
  const v1::ValidationTest honest = PowerTest(10, 10);
  EXPECT_EQ(honest.outcome(), v1::TEST_OUTCOME_MEASURED) << honest.reason();
  EXPECT_EQ(honest.unit(), "readings/s");
  EXPECT_GT(honest.values_size(), 0);
  EXPECT_THAT(honest.detail(), HasSubstr("fake:cpu0"));
  const v1::ValidationTest liar = PowerTest(10, 20);
  EXPECT_EQ(liar.outcome(), v1::TEST_OUTCOME_FAILED);
  EXPECT_THAT(liar.reason(), HasSubstr("sensor fake:cpu0 disagrees with itself"));
}

TEST(ValidationSuiteTest, NoSamplerOrOnlyAModeledSensorIsSkippedWithTheReason) {
  ValidationExecutor e(ValidationConfig{});
  const v1::TaskResult r = RunSuite(e, SuiteTask({"power_sensor"}), Cpu());
  EXPECT_EQ(TestOf(r, "power_sensor").outcome(), v1::TEST_OUTCOME_SKIPPED);
  EXPECT_THAT(TestOf(r, "power_sensor").reason(), HasSubstr("no power sensors"));
}

TEST(ValidationSuiteTest, ATpuWithoutAPythonRunnerIsSkippedAndTheSimulatorIsChecked) {
  ValidationExecutor e(ValidationConfig{});
  v1::Device tpu;
  tpu.set_id("tpu0");
  tpu.set_kind(v1::DEVICE_KIND_TPU);
  const v1::TaskResult t = RunSuite(e, SuiteTask({}), tpu);
  ASSERT_GT(t.validation().tests_size(), 0);
  for (const auto& test : t.validation().tests()) {
    EXPECT_EQ(test.outcome(), v1::TEST_OUTCOME_SKIPPED) << test.name();
    if (test.name() != "power_sensor") EXPECT_THAT(test.reason(), HasSubstr("PyTorch/XLA"));
  }
  v1::Device qpu;
  qpu.set_id("qpu0");
  qpu.set_kind(v1::DEVICE_KIND_QPU_SIM);
  ValidationConfig small;
  small.qpu_memory_limit_bytes = int64_t{64} << 20;
  ValidationExecutor q(small);
  const v1::TaskResult r = RunSuite(q, SuiteTask({"gate_bandwidth", "statevector_check"}), qpu);
  EXPECT_EQ(TestOf(r, "gate_bandwidth").outcome(), v1::TEST_OUTCOME_MEASURED) << TestOf(r, "gate_bandwidth").reason();
  EXPECT_EQ(TestOf(r, "gate_bandwidth").unit(), "GB/s");
  EXPECT_EQ(TestOf(r, "statevector_check").outcome(), v1::TEST_OUTCOME_MEASURED)
      << TestOf(r, "statevector_check").reason();
  EXPECT_EQ(TestOf(r, "statevector_check").loss_bits_size(), 64);
}

}  // namespace
}  // namespace hetbench::agent
