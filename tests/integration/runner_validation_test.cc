// A TPU's validation suite through the Python runner (agent/runners/
// torch_runner.py, Debian's python3-torch), its XLA path run against a fake
// torch_xla whose device is the CPU (tests/testing/fake_torch_xla: no TPU
// and no PyTorch/XLA here): the tests measure, the fingerprint repeats, a
// hung test is ended at its box and the others still run.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "agent/executors/python_executor.h"
#include "agent/validation/suite.h"
#include "common/clock.h"
#include "common/job_spec.h"

namespace hetbench::agent {
namespace {

using ::testing::HasSubstr;

class RunnerValidationTest : public ::testing::Test {
 protected:
  void SetUp() override { setenv("PYTHONPATH", HETBENCH_FAKE_TORCH_XLA, 1); }
  void TearDown() override { unsetenv("PYTHONPATH"); }

  static std::shared_ptr<PythonExecutor> Runner(std::vector<std::string> command, double startup_seconds = 60) {
    RunnerConfig c;
    c.command = std::move(command);
    c.threads = 1;
    c.hostname = "test-host";
    c.validation_startup_seconds = startup_seconds;
    c.kill_grace_seconds = 0.2;
    return std::make_shared<PythonExecutor>(c);
  }

  static v1::Assign Task(const std::vector<std::string>& tests, double box) {
    v1::Assign a;
    a.set_task_id("job-1-t0");
    a.set_attempt(1);
    a.set_device_id("tpu0");
    a.set_batch_size(32);
    a.set_model("validate");
    v1::JobSpec spec;
    spec.mutable_validate()->set_level("quick");
    spec.mutable_validate()->set_time_box_seconds(box);
    spec.mutable_validate()->set_repetitions(3);
    for (const std::string& t : tests) spec.mutable_validate()->add_tests(t);
    *a.mutable_spec() = WithDefaults(spec);
    return a;
  }

  static v1::Device Tpu() {
    v1::Device d;
    d.set_id("tpu0");
    d.set_kind(v1::DEVICE_KIND_TPU);
    d.set_model("fake TPU (torch_xla stand-in on the CPU)");
    d.set_cores(1);
    return d;
  }

  static v1::TaskResult RunSuite(const std::shared_ptr<PythonExecutor>& runner, const v1::Assign& task) {
    ValidationConfig config;
    config.threads = 1;
    config.runner = runner;
    ValidationExecutor e(config);
    TaskControl control(16, SteadyNowNs());
    auto r = e.Run(task, Tpu(), &control);
    EXPECT_TRUE(r.ok()) << r.status();
    return r.ok() ? *r : v1::TaskResult();
  }

  static v1::ValidationTest TestOf(const v1::TaskResult& r, const std::string& name) {
    for (const v1::ValidationTest& t : r.validation().tests()) {
      if (t.name() == name) return t;
    }
    ADD_FAILURE() << "no test " << name;
    return {};
  }
};

TEST_F(RunnerValidationTest, ATpusTestsRunInThePythonRunnerAndTheFingerprintRepeats) {
  const auto runner = Runner({"/usr/bin/python3", HETBENCH_RUNNER_SCRIPT});
  const v1::Assign task = Task({"matmul", "train_mlp", "infer_mlp", "power_sensor"}, 20);
  const v1::TaskResult r = RunSuite(runner, task);
  for (const char* name : {"matmul", "train_mlp", "infer_mlp"}) {
    const v1::ValidationTest t = TestOf(r, name);
    EXPECT_EQ(t.outcome(), v1::TEST_OUTCOME_MEASURED) << name << ": " << t.reason();
    EXPECT_EQ(t.values_size(), 3) << name;
    for (double v : t.values()) EXPECT_GT(v, 0) << name;
  }
  EXPECT_EQ(TestOf(r, "matmul").unit(), "GFLOP/s");
  EXPECT_THAT(TestOf(r, "matmul").detail(), HasSubstr("512x512"));  // the fake's device answers "CPU", not "TPU"
  EXPECT_EQ(TestOf(r, "power_sensor").outcome(), v1::TEST_OUTCOME_SKIPPED) << "read by the agent, which has none";
  ASSERT_EQ(TestOf(r, "train_mlp").loss_bits_size(), 8);
  const v1::TaskResult again = RunSuite(runner, Task({"train_mlp"}, 20));
  const auto bits = [](const v1::ValidationTest& t) {
    return std::vector<uint32_t>(t.loss_bits().begin(), t.loss_bits().end());
  };
  EXPECT_EQ(bits(TestOf(again, "train_mlp")), bits(TestOf(r, "train_mlp")))
      << "the same seed on the same device gives the same loss bit for bit";
  EXPECT_THAT(r.validation().sku(), HasSubstr("tpu|fake TPU"));
}

TEST_F(RunnerValidationTest, AHungTestIsTimedOutAtItsBoxAndTheOthersStillRun) {
  // A runner that hangs (ignoring SIGTERM) when asked for matmul, and is the real one otherwise.
  const std::string script = std::string("in=$(cat); case \"$in\" in *'\"matmul\"'*) trap '' TERM; sleep 60;; esac; ") +
                             "printf '%s' \"$in\" | exec /usr/bin/python3 " HETBENCH_RUNNER_SCRIPT;
  const auto runner = Runner({"/bin/sh", "-c", script}, /*startup_seconds=*/1);
  const v1::TaskResult r = RunSuite(runner, Task({"matmul", "memory_bandwidth"}, 6));
  const v1::ValidationTest hung = TestOf(r, "matmul");
  EXPECT_EQ(hung.outcome(), v1::TEST_OUTCOME_TIMED_OUT);
  EXPECT_THAT(hung.reason(), HasSubstr("time box of 6 s plus the runner's start-up allowance of 1 s: killed"));
  const v1::ValidationTest next = TestOf(r, "memory_bandwidth");
  EXPECT_EQ(next.outcome(), v1::TEST_OUTCOME_MEASURED) << next.reason();
}

TEST_F(RunnerValidationTest, WithoutARunnerATpusTestsAreSkippedWithTheProbesReason) {
  ValidationConfig config;
  config.runner_absent = "PyTorch is not importable by /usr/bin/python3";
  ValidationExecutor e(config);
  TaskControl control(16, SteadyNowNs());
  auto r = e.Run(Task({"matmul"}, 5), Tpu(), &control);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(TestOf(*r, "matmul").outcome(), v1::TEST_OUTCOME_SKIPPED);
  EXPECT_THAT(TestOf(*r, "matmul").reason(), HasSubstr("this agent has none: PyTorch is not importable"));
}

}  // namespace
}  // namespace hetbench::agent
