// An in-process coordinator and a real agent (LibTorch, real Fashion-MNIST)
// on 127.0.0.1:0, driven through the real CLI code.
#include <gmock/gmock.h>
#include <grpcpp/create_channel.h>
#include <grpcpp/generic/generic_stub.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <random>
#include <set>
#include <sstream>
#include <thread>

#include "absl/strings/match.h"
#include "absl/synchronization/notification.h"
#include "agent/agent.h"
#include "agent/devices/cpu_discovery.h"
#include "agent/executors/routing_executor.h"
#include "agent/executors/runner_executor.h"
#include "agent/executors/torch_executor.h"
#include "agent/power/power_sampler.h"
#include "agent/power/sensors.h"
#include "agent/qpu/device.h"
#include "client/cli.h"
#include "common/names.h"
#include "server/server.h"
#include "tests/testing/run_cli.h"
#include "tests/testing/tcp_proxy.h"
#include "tests/testing/temp_dir.h"

namespace hetbench {
namespace {

using ::testing::HasSubstr;

using testing::Cli;
using testing::CliResult;

class LoopbackTest : public ::testing::Test {
 protected:
  void SetUp() override {
    StartServer("127.0.0.1:0");
    agent::AgentConfig config;
    config.server_address = address_;
    if (ThroughProxy()) {
      proxy_ = std::make_unique<hetbench::testing::TcpProxy>(server_->grpc_port());
      config.server_address = proxy_->address();
    }
    config.agent_id = "loopback-agent";
    config.hostname = "localhost";
    config.initial_backoff_seconds = 0.05;
    config.max_backoff_seconds = 0.2;
    config.max_samples_per_batch = 16;  // many batches, to exercise sequencing
    agent::TorchExecutorConfig exec;
    exec.data_dir = HETBENCH_DATA_DIR;
    // One thread: ctest runs two tests at once on this 2-core machine, and two
    // OpenMP teams of two spin-waiting against each other slowed a task 6x.
    exec.threads = 1;
    exec.calibration_gemm_size = 256;  // the agent's default 2048 takes ~1 s; the figures are not checked here
    exec.blas.text = "checked by the test fixture";
    auto cpu = agent::DiscoverCpu("/proc", agent::AffinityCores());
    ASSERT_TRUE(cpu.ok());
    // As the real agent: the CPU runs the C++ executor and the Python runner.
    cpu->add_executors("torch");
    cpu->add_executors("python");
    v1::AbsentDevice tpu;
    tpu.set_kind(v1::DEVICE_KIND_TPU);
    tpu.set_reason("no /dev/accel* device (test fixture)");
    config.absent = {tpu};
    // Power: this VM has no RAPL, hwmon or GPU, so discovery falls back to
    // the labelled modeled sensor, as the real agent does here.
    agent::PowerDiscoveryConfig power;
    power.sys = std::make_shared<agent::RealSysfsReader>();
    power.proc = std::make_shared<agent::RealSysfsReader>("/proc");
    power.nvml_library = "libnvidia-ml-absent-in-tests.so.1";
    agent::SensorDiscovery sensors = agent::DiscoverPowerSensors(power, {*cpu});
    config.sensors_tried = sensors.tried;
    sampler_ = std::make_unique<agent::PowerSampler>(std::move(sensors.sensors), 20);
    sampler_->Start();
    auto executor = std::make_unique<agent::RoutingExecutor>();
    auto torch_executor = std::make_shared<agent::TorchExecutor>(exec);
    executor->Add("torch", torch_executor);
    executor->Add("qsim", torch_executor);
    agent::RunnerConfig runner;
    runner.command = {"/usr/bin/python3", HETBENCH_RUNNER_SCRIPT};
    runner.data_dir = HETBENCH_DATA_DIR;
    runner.threads = 1;
    runner.hostname = "localhost";
    executor->Add("python", std::make_shared<agent::RunnerExecutor>(runner));
    agent_ =
        std::make_unique<agent::Agent>(config, std::vector<v1::Device>{*cpu, agent::qpu::QpuSimDevice(*cpu, 1 << 30)},
                                       std::move(executor), sampler_.get());
    agent_->set_batch_observer([this](const v1::SampleBatch& b) {
      absl::MutexLock l(&mu_);
      sent_.push_back(b);
    });
    agent_thread_ = std::thread([this] { agent_->Run(); });
  }

  void TearDown() override {
    agent_->Shutdown();
    agent_thread_.join();
    server_->Shutdown(1.0);
    proxy_.reset();
  }

  /// The agent reaches the coordinator through a TCP proxy that tests can cut.
  virtual bool ThroughProxy() const { return false; }

  void StartServer(const std::string& listen) {
    server::ServerConfig config;
    config.listen_address = listen;
    // /metrics stays off here: civetweb's mg_start fails ("null context when
    // constructing CivetServer", after a successful bind and listen) inside a
    // process that has also loaded Debian's libtorch. hetbench-server never
    // loads libtorch; server_metrics_test and the e2e test scrape /metrics.
    config.metrics_address = "";
    config.db_path = dir_.path() + "/jobs.db";
    if (lease_seconds_ > 0) {
      config.coordinator.lease_seconds = lease_seconds_;
      config.coordinator.heartbeat_seconds = lease_seconds_ / 4;
    }
    server_ = std::make_unique<server::HetbenchServer>(config);
    absl::Status started = server_->Start();
    ASSERT_TRUE(started.ok()) << started;
    address_ = "127.0.0.1:" + std::to_string(server_->grpc_port());
  }

  v1::Job GetJob(const std::string& id) {
    v1::Job job;
    server_->coordinator().GetJob(id, [&](absl::StatusOr<v1::Job> j) { job = *j; });
    server_->coordinator().RunSync([] {});
    return job;
  }

  std::vector<std::string> ShortJob() {
    return {"--server",
            address_,
            "submit",
            "--wait",
            "-b",
            "64",
            "--warmup-steps",
            "2",
            "--min-steps",
            "40",
            "--min-duration",
            "0",
            "--infer-max-batches",
            "5",
            "-o",
            "json"};
  }

  /// Waits up to 30 s until job-000001's first task runs (attempt `attempt`,
  /// or any when 0) and has measured at least `steps` training steps.
  bool WaitUntilMeasuring(int64_t steps, int attempt = 0) {
    auto measuring = [&] {
      const v1::Task t = GetJob("job-000001").tasks(0);
      return t.state() == v1::TASK_STATE_RUNNING && (attempt == 0 || t.attempt() == attempt) &&
             t.phase() == v1::PHASE_TRAIN && t.step() >= steps;
    };
    // What was seen is the answer: asking again could find the task ended meanwhile.
    for (int i = 0; i < 600; ++i) {
      if (measuring()) return true;
      absl::SleepFor(absl::Milliseconds(50));
    }
    return false;
  }

  /// Submits one mlp task (batch 32) that measures exactly `steps` training
  /// steps and `infer` inference batches, whatever the time they take.
  CliResult SubmitExactJob(int steps, int infer) {
    return Cli({"--server", address_, "submit", "-b", "32", "--warmup-steps", "2", "--min-steps", std::to_string(steps),
                "--min-duration", "0", "--infer-max-batches", std::to_string(infer)});
  }

  /// Polls job-000001 until it ends or `timeout` passes; returns the last view.
  v1::Job WaitUntilEnded(absl::Duration timeout) {
    const absl::Time deadline = absl::Now() + timeout;
    v1::Job job = GetJob("job-000001");
    while (!IsTerminal(job.state()) && absl::Now() < deadline) {
      absl::SleepFor(absl::Milliseconds(50));
      job = GetJob("job-000001");
    }
    return job;
  }

  /// What a test failure should say about a task that did not end as expected.
  static std::string Describe(const v1::Task& t) {
    return absl::StrCat("task ", t.id(), " state ", v1::TaskState_Name(t.state()), " attempt ", t.attempt(), " phase ",
                        v1::Phase_Name(t.phase()), " step ", t.step(), "/", t.total_steps(), " error '", t.error(),
                        "'");
  }

  bool WaitForConnections(int64_t n) {
    for (int i = 0; i < 400 && agent_->connections() < n; ++i) absl::SleepFor(absl::Milliseconds(25));
    return agent_->connections() >= n;
  }

  hetbench::testing::TempDir dir_{"hetbench-loop"};
  double lease_seconds_ = 0;  // > 0: the coordinator's lease (heartbeats at a quarter of it)
  std::string address_;
  std::unique_ptr<server::HetbenchServer> server_;
  std::unique_ptr<hetbench::testing::TcpProxy> proxy_;
  std::unique_ptr<agent::PowerSampler> sampler_;
  std::unique_ptr<agent::Agent> agent_;
  std::thread agent_thread_;
  absl::Mutex mu_;
  std::vector<v1::SampleBatch> sent_ ABSL_GUARDED_BY(mu_);
};

// The same model through the C++ executor and the Python runner on one CPU,
// in one job: a side-by-side report with a speedup between the two.
TEST_F(LoopbackTest, CppAndPythonRunTheSameModelSideBySide) {
  ASSERT_TRUE(WaitForConnections(1));
  std::vector<std::string> args = ShortJob();
  args.insert(args.end(), {"-t", "cpu,cpu:python", "-m", "mlp"});
  CliResult r = Cli(args);
  ASSERT_EQ(r.code, 0) << r.err << r.out;
  v1::Job job = GetJob("job-000001");
  ASSERT_EQ(job.tasks_size(), 2);
  for (const v1::Task& t : job.tasks()) {
    ASSERT_EQ(t.state(), v1::TASK_STATE_SUCCEEDED) << t.id() << " " << t.error();
    EXPECT_EQ(t.result().samples_stored(), 45) << t.id();  // 40 steps + 5 inference batches, streamed and acked
    EXPECT_EQ(t.result().phases_size(), 2) << t.id();
    EXPECT_GT(t.result().test_accuracy(), 0.5) << t.id();
  }
  EXPECT_EQ(job.tasks(0).executor(), "torch");
  EXPECT_EQ(job.tasks(1).executor(), "python");
  const v1::RunEnvironment& cpp = job.tasks(0).result().environment();
  const v1::RunEnvironment& py = job.tasks(1).result().environment();
  EXPECT_EQ(cpp.architecture_fingerprint(), py.architecture_fingerprint());
  EXPECT_NE(cpp.model_fingerprint(), py.model_fingerprint());  // weights and data hashed differently
  EXPECT_EQ(py.executor(), "python");

  CliResult report = Cli({"--server", address_, "report", "job-000001"});
  ASSERT_EQ(report.code, 0) << report.err;
  EXPECT_THAT(report.out, HasSubstr("loopback-agent/cpu0 (cpu via python)"));
  EXPECT_THAT(report.out, ::testing::Not(HasSubstr("n/a: model fingerprints differ")));
  // Both rows have a speedup against the C++ baseline (1.00x for itself).
  EXPECT_THAT(report.out, ::testing::ContainsRegex("cpu via python\\)  64 +train .* [0-9]+\\.[0-9]+x "));
}

// `hetbench cancel` reaches the executor and the running task ends CANCELLED
// within 2 s, its measured samples kept and marked partial.
TEST_F(LoopbackTest, CancelStopsRunningTasksWithinTwoSecondsKeepingPartialResults) {
  ASSERT_TRUE(WaitForConnections(1));
  CliResult submit = Cli({"--server", address_, "submit", "-t", "cpu,cpu:python", "-b", "32", "--min-steps", "100000",
                          "--min-duration", "0"});
  ASSERT_EQ(submit.code, 0) << submit.err;
  // One CPU: the first task runs, the second waits; wait until the first has measured steps.
  ASSERT_TRUE(WaitUntilMeasuring(20));
  const absl::Time cancel_at = absl::Now();
  CliResult cancel = Cli({"--server", address_, "cancel", "job-000001"});
  ASSERT_EQ(cancel.code, 0) << cancel.err;
  v1::Job job;
  for (int i = 0; i < 400; ++i) {
    job = GetJob("job-000001");
    if (job.tasks(0).state() == v1::TASK_STATE_CANCELLED) break;
    absl::SleepFor(absl::Milliseconds(10));
  }
  const double seconds = absl::ToDoubleSeconds(absl::Now() - cancel_at);
  ASSERT_EQ(job.tasks(0).state(), v1::TASK_STATE_CANCELLED);
  EXPECT_LT(seconds, 2.0);
  std::printf("cancel -> CANCELLED with results in %.3f s\n", seconds);
  EXPECT_EQ(job.state(), v1::JOB_STATE_CANCELLED);
  EXPECT_EQ(job.tasks(1).state(), v1::TASK_STATE_CANCELLED);  // never started
  const v1::TaskResult& r = job.tasks(0).result();
  EXPECT_TRUE(r.partial());
  EXPECT_GE(r.samples_stored(), 20);
  ASSERT_GE(r.phases_size(), 1);
  EXPECT_EQ(r.phases(0).stats().count(), r.samples_stored());
  CliResult report = Cli({"--server", address_, "report", "job-000001"});
  EXPECT_THAT(report.out, HasSubstr("job-000001-t0: cancelled PARTIAL: stopped before its end"));
}

// A job for a kind no agent has stays queued, saying why; `get agents`
// explains the absent kinds.
TEST_F(LoopbackTest, AJobForAnAbsentKindStaysPendingWithTheReason) {
  ASSERT_TRUE(WaitForConnections(1));
  CliResult submit = Cli({"--server", address_, "submit", "-t", "tpu", "-b", "32"});
  ASSERT_EQ(submit.code, 0) << submit.err;
  CliResult job = Cli({"--server", address_, "get", "job", "job-000001"});
  ASSERT_EQ(job.code, 0) << job.err;
  EXPECT_THAT(job.out, HasSubstr("queued"));
  EXPECT_THAT(
      job.out,
      HasSubstr("no connected agent offers a tpu device (loopback-agent: no /dev/accel* device (test fixture))"));
  CliResult agents = Cli({"--server", address_, "get", "agents"});
  ASSERT_EQ(agents.code, 0) << agents.err;
  EXPECT_THAT(agents.out, ::testing::ContainsRegex("cpu0 +cpu .* torch,python"));
  EXPECT_THAT(agents.out, ::testing::ContainsRegex("qpu0 +qpu-sim .* qsim"));
  EXPECT_THAT(agents.out, HasSubstr("not offered:"));
  EXPECT_THAT(agents.out, ::testing::ContainsRegex("loopback-agent +tpu +no /dev/accel"));
  CliResult wide = Cli({"--server", address_, "get", "agents", "-o", "wide"});
  EXPECT_THAT(wide.out, HasSubstr("POWER_SENSORS"));
  EXPECT_THAT(wide.out, HasSubstr("DRIVER"));
  Cli({"--server", address_, "cancel", "job-000001"});
}

TEST_F(LoopbackTest, ShortJobRunsAndTheStoredSamplesAreExactlyTheSentOnes) {
  ASSERT_TRUE(WaitForConnections(1));
  CliResult r = Cli(ShortJob());
  ASSERT_EQ(r.code, 0) << r.err << r.out;
  EXPECT_THAT(r.out, HasSubstr("\"state\": \"JOB_STATE_SUCCEEDED\""));

  auto stored = server_->store().LoadSampleBatches("job-000001-t0", 1);
  ASSERT_TRUE(stored.ok());
  std::vector<v1::SampleBatch> sent;
  {
    absl::MutexLock l(&mu_);
    sent = sent_;
  }
  ASSERT_EQ(stored->size(), sent.size());
  int64_t train = 0, infer = 0;
  for (size_t i = 0; i < sent.size(); ++i) {
    EXPECT_EQ((*stored)[i].SerializeAsString(), sent[i].SerializeAsString()) << "batch " << i;
    (sent[i].phase() == v1::PHASE_TRAIN ? train : infer) += sent[i].duration_ns_size();
  }
  EXPECT_EQ(train, 40);  // --min-steps 40 with --min-duration 0
  EXPECT_EQ(infer, 5);   // --infer-max-batches 5
  EXPECT_GT(sent.size(), 3u);

  CliResult report = Cli({"--server", address_, "report", "job-000001"});
  ASSERT_EQ(report.code, 0) << report.err;
  EXPECT_THAT(report.out, HasSubstr("train  40"));
  EXPECT_THAT(report.out, HasSubstr("infer  5"));
  EXPECT_THAT(report.out, HasSubstr("45 samples stored"));
  EXPECT_THAT(report.out, HasSubstr("phases: data load"));

  // The studies' timers are all there, and the measured ones match the windows.
  v1::Job job = GetJob("job-000001");
  const v1::TaskResult& result = job.tasks(0).result();
  EXPECT_GT(result.preprocess_seconds(), 0);
  EXPECT_GT(result.warmup_seconds(), 0);  // 2 warm-up steps and 2 warm-up inference batches
  EXPECT_GT(result.train_seconds(), 0);
  EXPECT_GT(result.evaluate_seconds(), 0);
  for (const v1::PhaseResult& p : result.phases()) {
    const double wall = p.phase() == v1::PHASE_TRAIN ? result.train_seconds() : result.evaluate_seconds();
    EXPECT_LE(p.stats().total_ns() * 1e-9, wall);  // busy step time fits in the phase's wall time
  }
}

// One submission over several models: a task per model, the studies' table
// per model, per-layer timings, FLOPs and the device's calibration.
TEST_F(LoopbackTest, OneSubmissionRunsSeveralModelsWithTheStudyTableAndLayers) {
  ASSERT_TRUE(WaitForConnections(1));
  CliResult r =
      Cli({"--server", address_, "submit", "--wait", "-m", "mlp,autoencoder,cnn", "-b", "32", "--warmup-steps", "1",
           "--min-steps", "4", "--min-duration", "0", "--infer-max-batches", "3", "--layers", "--layer-steps", "2"});
  ASSERT_EQ(r.code, 0) << r.err << r.out;
  v1::Job job = GetJob("job-000001");
  ASSERT_EQ(job.tasks_size(), 3);
  EXPECT_EQ(job.tasks(0).model(), "mlp");
  EXPECT_EQ(job.tasks(1).model(), "autoencoder");
  EXPECT_EQ(job.tasks(2).model(), "cnn");
  EXPECT_EQ(job.spec().name(), "mlp+autoencoder+cnn");
  for (const v1::Task& t : job.tasks()) {
    EXPECT_EQ(t.state(), v1::TASK_STATE_SUCCEEDED) << t.id() << " " << t.error();
    EXPECT_THAT(t.result().environment().model_fingerprint(), HasSubstr(t.model() + "/params="));
    EXPECT_GT(t.result().forward_flops_per_sample(), 0) << t.model();
    EXPECT_EQ(t.result().calibration().gemm_size(), 256);
    EXPECT_GT(t.result().layers_size(), 0) << t.model();
  }
  EXPECT_EQ(job.tasks(2).result().layers_size(), 12);  // cnn's top-level layers
  EXPECT_THAT(r.out, HasSubstr("PEAK_GEMM_GFLOPS"));
  EXPECT_THAT(r.out, HasSubstr("kernel check: checked by the test fixture"));

  CliResult study = Cli({"--server", address_, "report", "job-000001", "--study"});
  ASSERT_EQ(study.code, 0) << study.err;
  EXPECT_THAT(study.out, HasSubstr("models mlp, autoencoder, cnn"));
  EXPECT_THAT(study.out, HasSubstr("TRAIN_VS_BASE"));
  EXPECT_THAT(study.out,
              ::testing::ContainsRegex("autoencoder +loopback-agent/cpu0 \\(cpu\\) +32 .* 100% +100% +mse 0\\."));

  CliResult layers = Cli({"--server", address_, "report", "job-000001", "--layers", "-o", "csv"});
  ASSERT_EQ(layers.code, 0) << layers.err;
  EXPECT_THAT(layers.out, HasSubstr("job-000001,job-000001-t2,cnn,loopback-agent,cpu0,cpu,32,3,\"Conv2d(32, 64"));

  CliResult bad = Cli({"--server", address_, "report", "job-000001", "--baseline", "abacus"});
  EXPECT_EQ(bad.code, 2);
  EXPECT_THAT(bad.err, HasSubstr("--baseline abacus: unknown device kind"));
}

// The qpu-sim device: the quantum variant trains through a normal job, the
// simulator benchmark times circuits, and classical models are refused there.
TEST_F(LoopbackTest, QpuSimRunsTheQuantumVariantAndTheSimulatorBenchmark) {
  ASSERT_TRUE(WaitForConnections(1));
  CliResult agents = Cli({"--server", address_, "get", "agents"});
  EXPECT_THAT(agents.out, ::testing::ContainsRegex("loopback-agent +qpu0 +qpu-sim +hetbench state-vector simulator"));

  CliResult qnn = Cli({"--server", address_, "submit", "--wait", "-m", "qnn", "-t", "qpu-sim", "-b", "32",
                       "--warmup-steps", "1", "--min-steps", "20", "--min-duration", "0", "--infer-max-batches", "4"});
  ASSERT_EQ(qnn.code, 0) << qnn.err << qnn.out;
  EXPECT_THAT(qnn.out, HasSubstr("loopback-agent/qpu0 (qpu-sim)"));
  EXPECT_THAT(qnn.out, HasSubstr("[simulated: 8 qubits, complex128, 56 gates in 56 passes per circuit"));
  EXPECT_THAT(qnn.out, HasSubstr("gradients: adjoint"));
  v1::Job job = GetJob("job-000001");
  EXPECT_EQ(job.tasks(0).device_kind(), v1::DEVICE_KIND_QPU_SIM);
  EXPECT_GT(job.tasks(0).result().test_accuracy(), 0.2) << "20 steps already beat chance (0.1)";

  CliResult qsim = Cli({"--server", address_, "submit", "--wait", "-m", "qsim", "-t", "qpu-sim", "-b", "1", "-f",
                        std::string(HETBENCH_FIXTURES) + "/specs/qsim.yaml"});
  ASSERT_EQ(qsim.code, 0) << qsim.err << qsim.out;
  EXPECT_THAT(qsim.out, HasSubstr("layered circuit, 12 qubits, depth 4, complex64: 70 gates in"));
  EXPECT_THAT(qsim.out,
              ::testing::ContainsRegex("job-000002-t0 +qsim +loopback-agent/qpu0 \\(qpu-sim\\) +1 +infer +5 "));

  CliResult wrong = Cli({"--server", address_, "submit", "--wait", "-m", "mlp", "-t", "qpu-sim"});
  EXPECT_EQ(wrong.code, 1);
  EXPECT_THAT(wrong.out + wrong.err, HasSubstr("model \"mlp\" cannot run on the qpu-sim device qpu0; use qnn"));
}

TEST_F(LoopbackTest, EnergyIsModeledAndLabelledWithAnIdleBaselineAndCost) {
  ASSERT_TRUE(WaitForConnections(1));
  std::vector<std::string> args = ShortJob();
  for (const char* extra : {"--idle-baseline", "0.5", "--cost", "cpu=0.34", "--electricity-usd-per-kwh", "0.2"}) {
    args.push_back(extra);
  }
  CliResult r = Cli(args);
  ASSERT_EQ(r.code, 0) << r.err << r.out;
  v1::Job job = GetJob("job-000001");
  const v1::TaskResult& result = job.tasks(0).result();
  EXPECT_GT(result.power_readings_stored(), 5);
  std::set<v1::Phase> phases;
  for (const v1::EnergyResult& e : result.energy()) {
    EXPECT_EQ(e.source(), v1::POWER_SOURCE_MODELED);
    EXPECT_THAT(e.assumptions(), HasSubstr("MODELED, not measured"));
    EXPECT_GT(e.energy_joules(), 0);
    EXPECT_GT(e.coverage(), 0.5);
    phases.insert(e.phase());
  }
  EXPECT_EQ(phases, (std::set<v1::Phase>{v1::PHASE_UNSPECIFIED, v1::PHASE_TRAIN, v1::PHASE_INFER, v1::PHASE_IDLE}));
  ASSERT_GE(result.cost_size(), 1);
  EXPECT_EQ(result.cost(0).rate_source(), "job cost.usd_per_hour[cpu]");
  EXPECT_GT(result.cost(0).usd_per_1000_samples(), 0);
  EXPECT_GT(result.cost(0).electricity_usd(), 0);

  CliResult report = Cli({"--server", address_, "report", "job-000001"});
  EXPECT_THAT(report.out, HasSubstr("modeled*"));
  EXPECT_THAT(report.out, HasSubstr("* MODELED, not measured"));
  CliResult study = Cli({"--server", address_, "report", "job-000001", "--study"});
  EXPECT_THAT(study.out, HasSubstr("E=PxT_J is the study's method"));
}

TEST_F(LoopbackTest, BadSpecsAreRefusedWithTheFieldNamedAndNothingStored) {
  CliResult zero = Cli({"--server", address_, "submit", "-b", "0"});
  EXPECT_EQ(zero.code, 1);
  EXPECT_THAT(zero.err, HasSubstr("batch_sizes[0] = 0: must be >= 1"));
  CliResult model = Cli({"--server", address_, "submit", "--model", "resnet999"});
  EXPECT_EQ(model.code, 1);
  EXPECT_THAT(model.err, HasSubstr("model = \"resnet999\": unknown model"));
  CliResult file =
      Cli({"--server", address_, "submit", "-f", std::string(HETBENCH_FIXTURES) + "/specs/bad-batch.yaml"});
  EXPECT_EQ(file.code, 1);
  EXPECT_THAT(file.err, HasSubstr("batch_sizes[1] = 0"));
  CliResult usage = Cli({"--server", address_, "submit", "--no-such-flag"});
  EXPECT_EQ(usage.code, 2);
  CliResult list = Cli({"--server", address_, "get", "jobs", "-o", "csv"});
  EXPECT_EQ(list.code, 0);
  EXPECT_EQ(list.out, "id,name,model,state,tasks,created\n");  // nothing stored
  CliResult missing = Cli({"--server", address_, "report", "job-424242"});
  EXPECT_EQ(missing.code, 1);
  EXPECT_THAT(missing.err, HasSubstr("not found"));
}

TEST_F(LoopbackTest, AgentReconnectsAfterTheCoordinatorRestartsAndTheNextJobRuns) {
  ASSERT_TRUE(WaitForConnections(1));
  const std::string listen = address_;
  server_->Shutdown(1.0);
  server_.reset();
  StartServer(listen);  // same port, same store
  ASSERT_TRUE(WaitForConnections(2));
  CliResult agents = Cli({"--server", address_, "get", "agents"});
  EXPECT_THAT(agents.out, HasSubstr("loopback-agent"));
  CliResult r = Cli(ShortJob());
  EXPECT_EQ(r.code, 0) << r.err;
}

// A coordinator restart in the middle of a task: the agent keeps training,
// reconnects to the new coordinator and resumes; nothing is re-run or lost.
TEST_F(LoopbackTest, ATaskRunningAcrossACoordinatorRestartIsResumedNotReRun) {
  ASSERT_TRUE(WaitForConnections(1));
  CliResult submit = SubmitExactJob(400, 10);
  ASSERT_EQ(submit.code, 0) << submit.err;
  ASSERT_TRUE(WaitUntilMeasuring(50));
  const std::string listen = address_;
  server_->Shutdown(1.0);
  server_.reset();
  StartServer(listen);  // same port, same store
  const v1::Job job = WaitUntilEnded(absl::Minutes(3));
  ASSERT_EQ(job.state(), v1::JOB_STATE_SUCCEEDED) << Describe(job.tasks(0));
  EXPECT_EQ(job.tasks(0).attempt(), 1);
  EXPECT_EQ(job.tasks(0).restarts(), 0);
  EXPECT_EQ(job.tasks(0).resumes(), 1);
  auto stored = server_->store().LoadSampleBatches("job-000001-t0", 1);
  ASSERT_TRUE(stored.ok());
  absl::MutexLock l(&mu_);
  ASSERT_EQ(stored->size(), sent_.size());
  for (size_t i = 0; i < sent_.size(); ++i) {
    EXPECT_EQ((*stored)[i].SerializeAsString(), sent_[i].SerializeAsString()) << "batch " << i;
  }
  EXPECT_EQ(job.tasks(0).result().samples_stored(), 410);
}

// GetJob answers a page of tasks at a time (default 256) with a token for
// the next; the CLI reads every page. Tasks wait for a gpu this host lacks.
TEST_F(LoopbackTest, GetJobPagesTasksAndTheCliReadsEveryPage) {
  auto stub = v1::Coordinator::NewStub(grpc::CreateChannel(address_, grpc::InsecureChannelCredentials()));
  v1::SubmitJobRequest submit;
  submit.mutable_spec()->add_models("mlp");
  for (int b = 1; b <= 64; ++b) submit.mutable_spec()->add_batch_sizes(b);
  for (int t = 0; t < 5; ++t) submit.mutable_spec()->add_targets()->set_device_kind(v1::DEVICE_KIND_GPU);
  v1::SubmitJobResponse submitted;
  grpc::ClientContext sctx;
  ASSERT_TRUE(stub->SubmitJob(&sctx, submit, &submitted).ok());

  v1::GetJobRequest req;
  req.set_job_id(submitted.job_id());
  req.set_task_page_size(100);
  req.set_view(v1::JOB_VIEW_SUMMARY);
  std::vector<int> indexes, page_sizes;
  do {
    grpc::ClientContext ctx;
    v1::Job page;
    grpc::Status s = stub->GetJob(&ctx, req, &page);
    ASSERT_TRUE(s.ok()) << s.error_message();
    EXPECT_EQ(page.id(), submitted.job_id());
    page_sizes.push_back(page.tasks_size());
    for (const v1::Task& t : page.tasks()) {
      indexes.push_back(t.index());
      EXPECT_FALSE(t.has_result());
      EXPECT_FALSE(t.pending_reason().empty());
    }
    req.set_task_page_token(page.next_task_page_token());
  } while (!req.task_page_token().empty());
  EXPECT_EQ(page_sizes, (std::vector<int>{100, 100, 100, 20}));
  ASSERT_EQ(indexes.size(), 320u);
  for (int i = 0; i < 320; ++i) EXPECT_EQ(indexes[i], i);

  req.set_task_page_token("not-a-token");
  grpc::ClientContext bad;
  v1::Job ignored;
  grpc::Status refused = stub->GetJob(&bad, req, &ignored);
  EXPECT_EQ(refused.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(refused.error_message(), HasSubstr("task_page_token"));

  CliResult r = Cli({"--server", address_, "get", "job", submitted.job_id(), "-o", "json"});
  ASSERT_EQ(r.code, 0) << r.err;
  size_t tasks = 0;
  for (size_t at = r.out.find(submitted.job_id() + "-t"); at != std::string::npos;
       at = r.out.find(submitted.job_id() + "-t", at + 1)) {
    ++tasks;
  }
  EXPECT_GE(tasks, 320u) << "every page of tasks is in the CLI's job";
}

TEST_F(LoopbackTest, HealthServiceAnswersServing) {
  CliResult r = Cli({"--server", address_, "health"});
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.out, "SERVING\n");
}

// An oversized request is refused by gRPC's size limit, a malformed one by
// the parser, and the coordinator keeps serving.
TEST_F(LoopbackTest, OversizedAndMalformedMessagesAreRefusedAndTheServerGoesOn) {
  grpc::ChannelArguments args;
  args.SetMaxSendMessageSize(64 << 20);
  auto channel = grpc::CreateCustomChannel(address_, grpc::InsecureChannelCredentials(), args);
  auto stub = v1::Coordinator::NewStub(channel);
  v1::SubmitJobRequest big;
  big.mutable_spec()->set_name(std::string(20 << 20, 'x'));  // 20 MiB, over the 16 MiB limit
  v1::SubmitJobResponse resp;
  grpc::ClientContext ctx;
  grpc::Status s = stub->SubmitJob(&ctx, big, &resp);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED) << s.error_message();

  // Bytes that are no SubmitJobRequest, sent through the generic stub.
  grpc::GenericStub generic(channel);
  grpc::ClientContext gctx;
  const char garbage[] = "\xff\xff\xff\xff\x0f not a protobuf";
  grpc::Slice slice(garbage, sizeof(garbage) - 1);
  grpc::ByteBuffer request(&slice, 1), reply;
  absl::Notification done;
  grpc::Status gs;
  generic.UnaryCall(&gctx, "/hetbench.v1.Coordinator/SubmitJob", grpc::StubOptions(), &request, &reply,
                    [&](grpc::Status st) {
                      gs = st;
                      done.Notify();
                    });
  done.WaitForNotification();
  EXPECT_FALSE(gs.ok());
  EXPECT_THAT(Cli({"--server", address_, "get", "job", "job-000001"}).err, HasSubstr("not found"));  // nothing stored
  CliResult health = Cli({"--server", address_, "health"});
  EXPECT_EQ(health.out, "SERVING\n");
  CliResult jobs = Cli({"--server", address_, "get", "jobs"});
  EXPECT_EQ(jobs.code, 0) << jobs.err;
}

}  // namespace
}  // namespace hetbench

namespace hetbench {
namespace {

class StreamCutTest : public LoopbackTest {
 protected:
  bool ThroughProxy() const override { return true; }

  /// The value of an unlabelled counter of the coordinator's /metrics registry.
  double Counter(const std::string& family) {
    for (const auto& f : server_->metrics().registry()->Collect()) {
      if (f.name == family && !f.metric.empty()) return f.metric[0].counter.value;
    }
    return -1;
  }
};

// Stream resume (#7): the link between agent and coordinator is cut again and
// again while a task runs. The agent keeps training, reconnects, lists the
// attempt in its Hello and sends what was not acknowledged; the coordinator
// re-binds the attempt. The task finishes as attempt 1 with every batch stored
// exactly once: what was received equals what was sent.
TEST_F(StreamCutTest, AStreamCutAgainAndAgainResumesFromTheLastAcknowledgedBatch) {
  ASSERT_TRUE(WaitForConnections(1));
  constexpr int kSteps = 1500, kInfer = 40;
  CliResult submit = SubmitExactJob(kSteps, kInfer);
  ASSERT_EQ(submit.code, 0) << submit.err;
  std::mt19937 rng(7);
  int cuts = 0;
  int64_t welcomed_at_cut = 0;  // cut a stream only once it is welcomed (its Hello, and so its resume, processed)
  v1::Job job;
  const absl::Time deadline = absl::Now() + absl::Minutes(4);
  for (;;) {
    job = GetJob("job-000001");
    if (IsTerminal(job.state()) || absl::Now() > deadline) break;
    absl::SleepFor(absl::Milliseconds(std::uniform_int_distribution<int>(150, 450)(rng)));
    const int64_t welcomed = agent_->connections();
    if (welcomed > welcomed_at_cut && GetJob("job-000001").tasks(0).state() == v1::TASK_STATE_RUNNING &&
        proxy_->CutAll() > 0) {
      ++cuts;
      welcomed_at_cut = welcomed;
    }
  }
  ASSERT_EQ(job.state(), v1::JOB_STATE_SUCCEEDED) << Describe(job.tasks(0));
  const v1::Task& task = job.tasks(0);
  EXPECT_EQ(task.attempt(), 1) << "a cut must not cost the attempt";
  EXPECT_GE(cuts, 8) << "the task ran too briefly to be cut often";
  // Every cut while the task ran was resumed, except one that came after the
  // agent's last message (the task had ended but the job was not seen yet).
  EXPECT_GE(task.resumes(), cuts - 1);

  auto stored = server_->store().LoadSampleBatches(task.id(), 1);
  ASSERT_TRUE(stored.ok());
  std::vector<v1::SampleBatch> sent;
  {
    absl::MutexLock l(&mu_);
    sent = sent_;
  }
  ASSERT_EQ(stored->size(), sent.size());
  std::set<uint64_t> seqs;
  int64_t train = 0, infer = 0;
  for (size_t i = 0; i < sent.size(); ++i) {
    EXPECT_EQ((*stored)[i].SerializeAsString(), sent[i].SerializeAsString()) << "batch " << i;
    EXPECT_TRUE(seqs.insert((*stored)[i].seq()).second) << "seq " << (*stored)[i].seq() << " stored twice";
    ((*stored)[i].phase() == v1::PHASE_TRAIN ? train : infer) += (*stored)[i].duration_ns_size();
  }
  EXPECT_EQ(train, kSteps);
  EXPECT_EQ(infer, kInfer);
  EXPECT_EQ(task.result().samples_stored(), kSteps + kInfer);
  // The cuts did catch messages in flight: some went again, and those the
  // coordinator already had were recognised rather than stored twice.
  EXPECT_GT(agent_->messages_resent(), 0);
  EXPECT_EQ(Counter("hetbench_tasks_resumed_total"), task.resumes());
  CliResult shown = Cli({"--server", address_, "get", "job", "job-000001"});
  EXPECT_THAT(shown.out, HasSubstr(absl::StrCat("resumed after ", task.resumes(), " broken stream(s)")));
  std::printf(
      "stream cut %d times while the task ran (%ld TCP connections); %d resumes; attempt %d; "
      "%zu batches / %ld samples sent, %zu / %ld stored, 0 duplicates; %ld messages sent again, "
      "%.0f of them already stored\n",
      cuts, static_cast<long>(proxy_->connections()), task.resumes(), task.attempt(), sent.size(),
      static_cast<long>(train + infer), stored->size(), static_cast<long>(task.result().samples_stored()),
      static_cast<long>(agent_->messages_resent()), Counter("hetbench_sample_batches_duplicate_total"));
}

// The end of a task on a link that dies unseen: the agent finishes, builds its
// TaskDone (counts of the batches it made) and writes it, but the coordinator
// hears nothing of the last part of the task, and then the link is cut. The
// agent, still holding the task, must not make further batches (power
// readings taken after the end): on the next stream it sends again exactly
// what the TaskDone counts, and the task succeeds as attempt 1. (Found by
// e2e.chaos: a power batch made after the TaskDone, sent again before it on
// resume, failed a task with "stored 3 of 2 batches".)
TEST_F(StreamCutTest, WhatTheAgentSendsAgainAfterItsTaskEndedIsExactlyWhatItsTaskDoneCounts) {
  ASSERT_TRUE(WaitForConnections(1));
  // Long enough to be seen measuring on an idle machine (300 steps took 1 s:
  // a single progress report fell in the window).
  CliResult submit = SubmitExactJob(1000, 10);
  ASSERT_EQ(submit.code, 0) << submit.err;
  ASSERT_TRUE(WaitUntilMeasuring(200));
  proxy_->SetSwallowingClientBytes(true);  // from here the coordinator hears nothing
  for (int i = 0; i < 1200 && agent_->tasks_finished() == 0; ++i) absl::SleepFor(absl::Milliseconds(50));
  ASSERT_EQ(agent_->tasks_finished(), 1);
  // Power readings go on after the task's end: give the pump time to (not) send them.
  absl::SleepFor(absl::Seconds(2.5));
  EXPECT_EQ(GetJob("job-000001").tasks(0).state(), v1::TASK_STATE_RUNNING);  // the TaskDone was swallowed
  proxy_->SetSwallowingClientBytes(false);
  EXPECT_GT(proxy_->CutAll(), 0);
  const v1::Job job = WaitUntilEnded(absl::Minutes(1));
  ASSERT_EQ(job.state(), v1::JOB_STATE_SUCCEEDED) << Describe(job.tasks(0));
  EXPECT_EQ(job.tasks(0).attempt(), 1);
  EXPECT_EQ(job.tasks(0).resumes(), 1);
  EXPECT_EQ(job.tasks(0).result().samples_stored(), 1010);
  auto power = server_->store().LoadPowerBatches("job-000001-t0", 1);
  ASSERT_TRUE(power.ok());
  EXPECT_FALSE(power->empty());
  for (size_t i = 0; i < power->size(); ++i) EXPECT_EQ((*power)[i].seq(), i);
  std::printf("TaskDone swallowed, link cut: resumed; %zu power batches and 1010 samples stored, as counted\n",
              power->size());
}

class ShortLeaseStreamCutTest : public StreamCutTest {
 protected:
  ShortLeaseStreamCutTest() { lease_seconds_ = 2.0; }
};

// The other side of resume: an agent cut off for longer than its lease. The
// coordinator takes the attempt back at the lease; the agent, without contact
// for a whole lease, stops it by itself; when the link returns it does not
// claim it, and the next attempt runs on the same device, apart from the first.
TEST_F(ShortLeaseStreamCutTest, AnAgentCutOffLongerThanItsLeaseStopsItsAttemptAndTheTaskRunsAgain) {
  ASSERT_TRUE(WaitForConnections(1));
  CliResult submit = Cli({"--server", address_, "submit", "-b", "32", "--min-steps", "100000", "--min-duration", "0"});
  ASSERT_EQ(submit.code, 0) << submit.err;
  ASSERT_TRUE(WaitUntilMeasuring(20, /*attempt=*/1));
  proxy_->SetRefusing(true);
  const absl::Time cut_at = absl::Now();
  // Meanwhile `get agents` shows the agent disconnected, its device held.
  CliResult agents;
  for (int i = 0; i < 20; ++i) {
    agents = Cli({"--server", address_, "get", "agents"});
    if (absl::StrContains(agents.out, "disconnected;")) break;
  }
  EXPECT_THAT(agents.out, ::testing::ContainsRegex("loopback-agent +cpu0 .* busy, disconnected"));
  EXPECT_THAT(agents.out, ::testing::ContainsRegex("\nloopback-agent +cpu0 +[0-9-]+ [0-9:]+Z +stream closed by"));
  std::printf("hetbench get agents, during the cut:\n%s", agents.out.c_str());
  v1::Job job;
  for (int i = 0; i < 400; ++i) {
    job = GetJob("job-000001");
    if (job.tasks(0).state() != v1::TASK_STATE_RUNNING) break;
    absl::SleepFor(absl::Milliseconds(25));
  }
  const double requeue_s = absl::ToDoubleSeconds(absl::Now() - cut_at);
  ASSERT_EQ(job.tasks(0).state(), v1::TASK_STATE_QUEUED);
  EXPECT_THAT(job.tasks(0).error(), HasSubstr("did not resume within the lease"));
  EXPECT_GE(requeue_s, 1.0);  // not at the first broken stream: the agent may come back
  EXPECT_LE(requeue_s, lease_seconds_ + 1.5);
  absl::SleepFor(absl::Seconds(1));  // the agent's own lease runs out too
  proxy_->SetRefusing(false);
  ASSERT_TRUE(WaitUntilMeasuring(20, /*attempt=*/2)) << GetJob("job-000001").tasks(0).error();
  job = GetJob("job-000001");
  EXPECT_EQ(job.tasks(0).device_id(), "cpu0");  // the device was free: attempt 1 had stopped
  EXPECT_EQ(job.tasks(0).resumes(), 0);
  auto first = server_->store().LoadSampleBatches("job-000001-t0", 1);
  ASSERT_TRUE(first.ok());
  EXPECT_FALSE(first->empty());  // attempt 1's samples stay under attempt 1
  CliResult cancel = Cli({"--server", address_, "cancel", "job-000001"});
  EXPECT_EQ(cancel.code, 0) << cancel.err;
  std::printf(
      "cut off for longer than the %.1f s lease: attempt 1 taken back after %.2f s, attempt 2 ran on the "
      "same device\n",
      lease_seconds_, requeue_s);
}

}  // namespace
}  // namespace hetbench
