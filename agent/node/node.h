#pragma once
/// One node's agent, assembled: device discovery (CPU given, then DPU, GPU,
/// TPU, qpu-sim), the Python runner's probe, power sensors and their
/// sampler, the executors, and the Agent that connects them to the
/// coordinator. The agent's counterpart of server::HetbenchServer:
/// hetbench-agent's main parses flags into NodeOptions and runs a Node, and
/// the loopback tests run the same Node in-process.

#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "agent/agent.h"
#include "agent/devices/calibration.h"
#include "agent/executors/python_executor.h"
#include "agent/executors/torch_executor.h"
#include "agent/power/power_sampler.h"

namespace hetbench::agent {

struct NodeOptions {
  AgentConfig agent;
  TorchExecutorConfig executor;  // its blas, hostname and rendezvous host are filled in by Node
  double power_sample_hz = 10;
  double cost_usd_per_hour = 0;  // > 0: an attribute of the CPU the coordinator prices with
  std::string sysfs_root;        // prefix of /sys, /proc and /dev (fixture trees in tests)
  /// Tests and drills only: "TEST=fail" makes that validation test fail with
  /// a wrong result, "TEST=hang" makes it hang past its time box.
  std::string validation_fault;
  std::string nvml_library = "libnvidia-ml.so.1";
  std::string ipmi_command;      // "" = no IPMI sensor
  std::map<v1::DeviceKind, double> nominal_watts;
  bool qpu_sim = true;
  int64_t qpu_memory_bytes = 0;  // 0 = half the memory, at most 8 GiB
  /// "auto" (/usr/bin/python3 with the shipped torch_runner.py), "off", or a command line.
  std::string python_runner = "auto";
  RunnerConfig runner;           // its command is set from python_runner; data dir and threads from executor
  std::string agent_executable;  // argv[0]: where "auto" looks for the runner script
  /// Given: used instead of running the runner's probe (tests that know the runner).
  std::optional<v1::RunnerProbe> runner_probe;
};

class Node {
 public:
  /// Discovers everything around `cpu` (already BLAS-settled), starts the
  /// power sampler and builds the Agent. Fails only on a setup error.
  static absl::StatusOr<std::unique_ptr<Node>> Create(NodeOptions options, v1::Device cpu);

  /// Connects and serves tasks until Shutdown (blocking).
  void Run() { agent_->Run(); }
  void Shutdown() { agent_->Shutdown(); }

  Agent& agent() { return *agent_; }
  const std::vector<v1::Device>& devices() const { return devices_; }
  const std::vector<v1::AbsentDevice>& absent() const { return options_.agent.absent; }

 private:
  explicit Node(NodeOptions options) : options_(std::move(options)) {}
  absl::Status Assemble(v1::Device cpu);

  NodeOptions options_;
  std::vector<v1::Device> devices_;
  std::unique_ptr<PowerSampler> sampler_;
  std::unique_ptr<Agent> agent_;  // declared after the sampler it reads: destroyed first
};

/// "kind=W" of --nominal-watts.
absl::StatusOr<std::pair<v1::DeviceKind, double>> ParseNominalWatts(const std::string& text);
/// "key=value" of --label.
absl::StatusOr<std::pair<std::string, std::string>> ParseLabel(const std::string& text);

}  // namespace hetbench::agent
