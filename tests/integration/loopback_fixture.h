#pragma once
// An in-process coordinator and a real agent (LibTorch, real Fashion-MNIST) on
// 127.0.0.1:0, optionally through a TCP proxy that can cut the link; shared by
// loopback_test (jobs end to end through the real CLI code) and
// stream_cut_test (broken streams resumed).
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
#include "agent/executors/python_executor.h"
#include "agent/executors/torch_executor.h"
#include "agent/node/node.h"
#include "agent/power/sensors.h"
#include "agent/qpu/device.h"
#include "client/cli.h"
#include "common/names.h"
#include "server/server.h"
#include "tests/testing/run_cli.h"
#include "tests/testing/tcp_proxy.h"
#include "tests/testing/temp_dir.h"
#include "tests/testing/wait.h"

namespace hetbench::loopback_testing {

using ::testing::HasSubstr;

using testing::Cli;
using testing::CliResult;

class LoopbackTest : public ::testing::Test {
 protected:
  void SetUp() override {
    StartServer("127.0.0.1:0");
    // The agent as hetbench-agent assembles it (agent/node), on this VM's
    // real /proc and /sys: no RAPL, hwmon or GPU here, so power falls back to
    // the labelled modeled sensor, and the GPU and TPU are absent with why.
    agent::NodeOptions node;
    agent::AgentConfig& config = node.agent;
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
    agent::TorchExecutorConfig& exec = node.executor;
    exec.data_dir = HETBENCH_DATA_DIR;
    // One thread: ctest runs two tests at once on this 2-core machine, and two
    // OpenMP teams of two spin-waiting against each other slowed a task 6x.
    exec.threads = 1;
    exec.calibration_gemm_size = 256;  // the agent's default 2048 takes ~1 s; the figures are not checked here
    exec.blas.text = "checked by the test fixture";
    node.power_sample_hz = 20;
    node.nvml_library = "libnvidia-ml-absent-in-tests.so.1";
    node.qpu_memory_bytes = int64_t{1} << 30;
    node.python_runner = absl::StrCat("/usr/bin/python3 ", HETBENCH_RUNNER_SCRIPT);
    // The runner is known here: its probe (an import of torch, seconds) is not repeated per test.
    v1::RunnerProbe probe;
    probe.set_python("3 (probe skipped by the test fixture)");
    probe.set_torch_version("python3-torch");
    node.runner_probe = probe;
    auto cpu = agent::DiscoverCpu("/proc", agent::AffinityCores());
    ASSERT_TRUE(cpu.ok());
    auto built = agent::Node::Create(std::move(node), *std::move(cpu));
    ASSERT_TRUE(built.ok()) << built.status();
    node_ = *std::move(built);
    agent_ = &node_->agent();
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
    // An ended job is read off the loop: the answer comes on the reader's thread.
    v1::Job job;
    absl::Notification done;
    server_->coordinator().api().GetJob(id, [&](absl::StatusOr<v1::Job> j) {
      if (j.ok()) {
        job = *std::move(j);
      } else {
        ADD_FAILURE() << "GetJob(" << id << "): " << j.status();
      }
      done.Notify();
    });
    done.WaitForNotification();
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
    return hetbench::testing::WaitFor(measuring, absl::Seconds(30), absl::Milliseconds(50));
  }

  /// Submits one mlp task (batch 32) that measures exactly `steps` training
  /// steps and `infer` inference batches, whatever the time they take.
  CliResult SubmitExactJob(int steps, int infer) {
    return Cli({"--server", address_, "submit", "-b", "32", "--warmup-steps", "2", "--min-steps", std::to_string(steps),
                "--min-duration", "0", "--infer-max-batches", std::to_string(infer)});
  }

  /// Polls job-000001 until it ends or `timeout` passes; returns the last view.
  v1::Job WaitUntilEnded(absl::Duration timeout) {
    v1::Job job;
    hetbench::testing::WaitFor(
        [&] {
          job = GetJob("job-000001");
          return IsTerminal(job.state());
        },
        timeout, absl::Milliseconds(50));
    return job;
  }

  /// What a test failure should say about a task that did not end as expected.
  static std::string Describe(const v1::Task& t) {
    return absl::StrCat("task ", t.id(), " state ", v1::TaskState_Name(t.state()), " attempt ", t.attempt(), " phase ",
                        v1::Phase_Name(t.phase()), " step ", t.step(), "/", t.total_steps(), " error '", t.error(),
                        "'");
  }

  bool WaitForConnections(int64_t n) {
    return hetbench::testing::WaitFor([&] { return agent_->counters().connections.load() >= n; }, absl::Seconds(10),
                                      absl::Milliseconds(25));
  }

  hetbench::testing::TempDir dir_{"hetbench-loop"};
  double lease_seconds_ = 0;  // > 0: the coordinator's lease (heartbeats at a quarter of it)
  std::string address_;
  std::unique_ptr<server::HetbenchServer> server_;
  std::unique_ptr<hetbench::testing::TcpProxy> proxy_;
  std::unique_ptr<agent::Node> node_;
  agent::Agent* agent_ = nullptr;
  std::thread agent_thread_;
  absl::Mutex mu_;
  std::vector<v1::SampleBatch> sent_ ABSL_GUARDED_BY(mu_);
};

// The same model through the C++ executor and the Python runner on one CPU,
// in one job: a side-by-side report with a speedup between the two.

}  // namespace hetbench::loopback_testing
