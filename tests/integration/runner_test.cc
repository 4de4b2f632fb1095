// The external runner executor against the shipped Python runner (Debian's
// python3-torch on this CPU) and against small shell stand-ins for runners
// that misbehave.
#include <gmock/gmock.h>
#include <google/protobuf/util/json_util.h>
#include <gtest/gtest.h>

#include <atomic>
#include <cstdio>
#include <fstream>
#include <memory>
#include <sstream>
#include <thread>

#include "absl/time/clock.h"
#include "agent/data/fashion_mnist.h"
#include "agent/executors/machine_probe.h"
#include "agent/executors/python_executor.h"
#include "agent/models/models.h"
#include "agent/models/workload.h"
#include "common/clock.h"
#include "common/job_spec.h"
#include "tests/testing/temp_dir.h"
#include "tests/testing/wait.h"

namespace hetbench::agent {
namespace {

using ::testing::HasSubstr;

const std::vector<std::string> kRunner = {"/usr/bin/python3", HETBENCH_RUNNER_SCRIPT};

v1::Assign MlpTask(int64_t min_steps, int64_t max_batches) {
  v1::Assign a;
  a.set_task_id("job-1-t0");
  a.set_attempt(1);
  a.set_device_id("cpu0");
  a.set_batch_size(128);
  a.set_model("mlp");
  a.set_executor("python");
  v1::JobSpec spec;
  spec.add_models("mlp");
  spec.add_batch_sizes(128);
  spec.mutable_train()->set_warmup_steps(3);
  spec.mutable_train()->set_min_steps(min_steps);
  spec.mutable_train()->set_min_duration_seconds(0);
  spec.mutable_inference()->set_max_batches(max_batches);
  spec.set_threads(2);
  *a.mutable_spec() = WithDefaults(spec);
  return a;
}

v1::Device Cpu() {
  v1::Device d;
  d.set_id("cpu0");
  d.set_kind(v1::DEVICE_KIND_CPU);
  d.set_cores(2);
  d.set_model("test CPU");
  d.add_executors("torch");
  d.add_executors("python");
  return d;
}

RunnerConfig Config(std::vector<std::string> command = kRunner) {
  RunnerConfig c;
  c.command = std::move(command);
  c.data_dir = HETBENCH_DATA_DIR;
  c.hostname = "test-host";
  return c;
}

std::string PythonFingerprint(const std::string& model) {
  FILE* p = popen(("/usr/bin/python3 " HETBENCH_RUNNER_SCRIPT " --fingerprint " + model).c_str(), "r");
  std::string out;
  char buf[512];
  while (p != nullptr && fgets(buf, sizeof(buf), p) != nullptr) out += buf;
  if (p != nullptr) pclose(p);
  return out;
}

TEST(RunnerProbeTest, ThePythonRunnerAnswersWithDebiansPyTorch) {
  v1::RunnerProbe probe = PythonExecutor::Probe(kRunner, 120);
  ASSERT_TRUE(probe.error().empty()) << probe.error();
  EXPECT_THAT(probe.torch_version(), HasSubstr("1.13"));
  EXPECT_FALSE(probe.xla_available());  // no torch_xla in Debian: TPUs stay absent here
  // The runner's own list is the model table's (common/job_spec.cc), not a second list.
  EXPECT_THAT(probe.models(), ::testing::ElementsAreArray(PythonRunnerModels()));
}

TEST(RunnerProbeTest, AMissingRunnerSaysWhy) {
  v1::RunnerProbe missing = PythonExecutor::Probe({"/nonexistent/python3"}, 5);
  EXPECT_THAT(missing.error(), HasSubstr("cannot start the runner"));
  v1::RunnerProbe broken = PythonExecutor::Probe({"/bin/sh", "-c", "echo no torch here >&2; exit 3", "sh"}, 5);
  EXPECT_THAT(broken.error(), HasSubstr("exit status 3"));
  EXPECT_THAT(broken.error(), HasSubstr("no torch here"));
}

// The Python models are the C++ zoo's, layer for layer: same parameter count
// and parameter shapes in the same order.
TEST(RunnerFingerprintTest, PythonModelsMatchTheCppZoo) {
  for (const std::string& model : PythonRunnerModels()) {
    auto built = BuildModel(model, 42, {});
    ASSERT_TRUE(built.ok()) << built.status();
    const std::string cpp = ArchitectureFingerprint(model, built->net->parameters());
    EXPECT_THAT(PythonFingerprint(model), HasSubstr("\"" + cpp + "\"")) << model;
    EXPECT_THAT(cpp, HasSubstr(absl::StrCat("/params=", built->parameter_count, "/"))) << model;
  }
}

TEST(PythonExecutorTest, TrainsMlpOnTheCpuThroughTheProtocol) {
  PythonExecutor executor(Config());
  const v1::Assign task = MlpTask(40, 5);
  TaskControl control(SampleCapacity(task), SteadyNowNs());
  auto result = executor.Run(task, Cpu(), &control);
  ASSERT_TRUE(result.ok()) << result.status();
  // Every measured step and inference batch came back as a sample, in order, on the agent's clock.
  ASSERT_EQ(control.samples.published(), 45u);
  int64_t last = -1, train = 0, infer = 0;
  for (size_t i = 0; i < control.samples.published(); ++i) {
    const SampleRecord& r = control.samples.at(i);
    EXPECT_GT(r.start_ns, last);
    EXPECT_GT(r.duration_ns, 0);
    last = r.start_ns;
    (r.phase == v1::PHASE_TRAIN ? train : infer) += 1;
    EXPECT_EQ(r.items, 128);
  }
  EXPECT_EQ(train, 40);
  EXPECT_EQ(infer, 5);
  EXPECT_LT(last, SteadyNowNs() - control.task_start_ns);
  ASSERT_EQ(result->windows_size(), 2);
  EXPECT_LE(result->windows(0).start_ns(), control.samples.at(0).start_ns);
  EXPECT_EQ(result->train_steps_total(), 43);
  EXPECT_GT(result->test_accuracy(), 0.5);  // 43 steps of Adam on Fashion-MNIST
  EXPECT_EQ(result->dataset_train_size(), 60000);
  const v1::RunEnvironment& env = result->environment();
  EXPECT_EQ(env.executor(), "python");
  EXPECT_EQ(env.torch_device(), "cpu");
  EXPECT_EQ(env.threads(), 2);
  EXPECT_EQ(env.hostname(), "test-host");
  auto built = BuildModel("mlp", 42, {});
  EXPECT_EQ(env.architecture_fingerprint(), ArchitectureFingerprint("mlp", built->net->parameters()));
  EXPECT_EQ(env.parameter_count(), built->parameter_count);
  // The machine around the run, read by the agent at the runner's 2 threads.
  const v1::MachineProbe& probe = result->machine_probe();
  EXPECT_EQ(probe.kernel(), ProbeKernel(2));
  EXPECT_GT(probe.before_ns(), 0);
  EXPECT_GT(probe.after_ns(), 0);
}

// Cancel stops the runner mid-run, keeping what it streamed. How fast is
// printed, not asserted (a timed assertion flakes on a loaded machine); the
// 30 s deadline only tells a stop from a hang.
TEST(PythonExecutorTest, CancelStopsTheRunnerKeepingWhatItStreamed) {
  RunnerConfig config = Config();
  config.kill_grace_seconds = 1.0;
  PythonExecutor executor(config);
  const v1::Assign task = MlpTask(100000, 0);
  TaskControl control(SampleCapacity(task), SteadyNowNs());
  absl::StatusOr<v1::TaskResult> result;
  std::atomic<bool> done{false};
  std::thread t([&] {
    result = executor.Run(task, Cpu(), &control);
    done = true;
  });
  // Cancel once training is under way (samples streaming).
  ASSERT_TRUE(hetbench::testing::WaitFor([&] { return control.samples.published() >= 10; }, absl::Minutes(1)));
  const int64_t cancel_ns = SteadyNowNs();
  control.cancel = true;
  const bool stopped = hetbench::testing::WaitFor([&] { return done.load(); }, absl::Seconds(30), absl::Milliseconds(5));
  const double stop_seconds = static_cast<double>(SteadyNowNs() - cancel_ns) * 1e-9;
  t.join();
  EXPECT_TRUE(stopped) << "the runner did not stop within 30 s of the cancel";
  ASSERT_TRUE(result.ok()) << result.status();  // partial: the agent reports CANCELLED with what was streamed
  const size_t kept = control.samples.published();
  EXPECT_GE(kept, 10u);
  EXPECT_LT(kept, 100000u);
  std::printf("runner stopped %.3f s after cancel, %zu samples kept\n", stop_seconds, kept);
}

TEST(PythonExecutorTest, DeadlineKillsAHungRunner) {
  RunnerConfig config = Config({"/bin/sh", "-c", "trap '' TERM; sleep 30", "sh"});
  config.deadline_seconds = 0.5;
  config.kill_grace_seconds = 0.2;
  PythonExecutor executor(config);
  const v1::Assign task = MlpTask(10, 1);
  TaskControl control(SampleCapacity(task), SteadyNowNs());
  const int64_t start = SteadyNowNs();
  auto result = executor.Run(task, Cpu(), &control);
  EXPECT_LT(SteadyNowNs() - start, 5'000'000'000);  // SIGKILL reached the ignoring shell and its sleep
  ASSERT_FALSE(result.ok());
  EXPECT_EQ(result.status().code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_THAT(result.status().message(), HasSubstr("--runner-deadline-seconds"));
}

TEST(PythonExecutorTest, MisbehavingRunnersFailWithTheirWords) {
  const v1::Assign task = MlpTask(10, 1);
  struct Case {
    std::string script, expect;
  } cases[] = {
      {"cat >/dev/null; echo 'not json'", "line 1 is not a RunnerEvent"},
      {"cat >/dev/null; echo 'CUDA out of memory' >&2; exit 4", "exit status 4): CUDA out of memory"},
      {"cat >/dev/null; echo '{\"error\":\"model qnn is not implemented\"}'; exit 2", "model qnn is not implemented"},
      {"cat >/dev/null; exit 0", "without a result line"},
      {"cat >/dev/null; echo '{\"samples\":{\"phase\":\"PHASE_TRAIN\",\"start_ns\":[1,2],\"duration_ns\":[5],"
       "\"items\":[1,1]}}'",
       "sample columns differ"},
  };
  for (const Case& c : cases) {
    PythonExecutor executor(Config({"/bin/sh", "-c", c.script, "sh"}));
    TaskControl control(SampleCapacity(task), SteadyNowNs());
    auto result = executor.Run(task, Cpu(), &control);
    ASSERT_FALSE(result.ok()) << c.script;
    EXPECT_THAT(result.status().message(), HasSubstr(c.expect)) << c.script;
  }
}

// The probe is the agent's reading on a CPU task: a runner's own claim is
// dropped, a TPU task (the runner drives the TPU, not the CPU) gets none, and
// the config can turn it off.
TEST(PythonExecutorTest, TheMachineProbeIsTheAgentsOnCpuTasksOnly) {
  const std::vector<std::string> claims = {
      "/bin/sh", "-c",
      "cat > /dev/null; echo '{\"result\": {\"machine_probe\": {\"kernel\": \"fake\", \"before_ns\": \"1\"}}}'"};
  const v1::Assign task = MlpTask(10, 1);
  PythonExecutor executor(Config(claims));
  TaskControl control(SampleCapacity(task), SteadyNowNs());
  auto cpu = executor.Run(task, Cpu(), &control);
  ASSERT_TRUE(cpu.ok()) << cpu.status();
  EXPECT_EQ(cpu->machine_probe().kernel(), ProbeKernel(2));
  EXPECT_GT(cpu->machine_probe().before_ns(), 1);
  EXPECT_GT(cpu->machine_probe().after_ns(), 0);

  v1::Device tpu = Cpu();
  tpu.set_id("tpu0");
  tpu.set_kind(v1::DEVICE_KIND_TPU);
  TaskControl tpu_control(SampleCapacity(task), SteadyNowNs());
  auto on_tpu = executor.Run(task, tpu, &tpu_control);
  ASSERT_TRUE(on_tpu.ok()) << on_tpu.status();
  EXPECT_FALSE(on_tpu->has_machine_probe());

  RunnerConfig off = Config(claims);
  off.machine_probe = false;
  PythonExecutor unprobed(off);
  TaskControl off_control(SampleCapacity(task), SteadyNowNs());
  auto no_probe = unprobed.Run(task, Cpu(), &off_control);
  ASSERT_TRUE(no_probe.ok()) << no_probe.status();
  EXPECT_FALSE(no_probe->has_machine_probe());
}

TEST(PythonExecutorTest, TheTaskReachesTheRunnerAsJson) {
  // A stand-in runner that keeps what it was given.
  testing::TempDir dir;
  const std::string file = dir.path() + "/task.json";
  PythonExecutor executor(Config({"/bin/sh", "-c", "cat > \"$0\"; exit 2", file}));
  const v1::Assign task = MlpTask(10, 1);
  TaskControl control(SampleCapacity(task), 12345);
  auto result = executor.Run(task, Cpu(), &control);
  EXPECT_THAT(result.status().message(), HasSubstr("exit status 2"));
  std::ifstream in(file);
  std::stringstream json;
  json << in.rdbuf();
  v1::RunnerTask got;
  auto parsed = google::protobuf::util::JsonStringToMessage(json.str(), &got);
  ASSERT_TRUE(parsed.ok()) << parsed.ToString() << json.str();
  EXPECT_EQ(got.assign().model(), "mlp");
  EXPECT_EQ(got.assign().spec().train().min_steps(), 10);
  EXPECT_EQ(got.task_start_ns(), 12345);
  EXPECT_EQ(got.threads(), 2);
  EXPECT_EQ(got.torch_device(), "cpu");
  EXPECT_EQ(got.data_dir(), HETBENCH_DATA_DIR);
}

}  // namespace
}  // namespace hetbench::agent
