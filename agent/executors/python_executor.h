#pragma once
/// Runs a task in an external runner process (agent/runners/): the path for
/// devices LibTorch's C++ API cannot drive (Cloud TPUs through PyTorch/XLA),
/// and the PyTorch-in-Python side of C++-vs-Python comparisons on any CPU.
///
/// The protocol is in proto/hetbench/v1/runner.proto: one RunnerTask as JSON
/// on the runner's stdin, one RunnerEvent per line on its stdout. The agent
/// keeps doing what it does for every task (power sampling, streaming,
/// acknowledgements); this executor only turns runner lines into samples,
/// progress and the result, enforces the deadline, and stops the runner on
/// cancel (SIGTERM to its process group, SIGKILL after a grace period).

#include <string>
#include <vector>

#include "agent/executors/executor.h"
#include "hetbench/v1/runner.pb.h"

namespace hetbench::agent {

struct RunnerConfig {
  /// The command, argv style, e.g. {"/usr/bin/python3", ".../torch_runner.py"}.
  std::vector<std::string> command;
  std::string data_dir = "/usr/share/datasets/fashion-mnist";
  int threads = 0;                  // 0 = the device's cores; a job's `threads` overrides
  double deadline_seconds = 7200;   // a task running longer is killed and fails
  /// A validation test (one per runner start) is killed after its time box
  /// plus this: Python's imports and an XLA device's start.
  double validation_startup_seconds = 60;
  double kill_grace_seconds = 1.0;  // between SIGTERM and SIGKILL
  std::string hostname;
  /// Time the machine probe (machine_probe.h) in the agent, at the task's
  /// thread count, just before the runner starts and just after it exits,
  /// for a CPU task: the runner's PyTorch runs on the machine the probe
  /// reads, so compare can leave out runs taken in another machine state.
  bool machine_probe = true;
};

class PythonExecutor final : public Executor {
 public:
  explicit PythonExecutor(RunnerConfig config);
  absl::StatusOr<v1::TaskResult> Run(const v1::Assign& task, const v1::Device& device, TaskControl* control) override;

  /// Runs `command --probe` and parses its one-line RunnerProbe; on any
  /// failure the probe's `error` says what went wrong.
  static v1::RunnerProbe Probe(const std::vector<std::string>& command, double timeout_seconds);

 private:
  /// The task as the runner reads it: one JSON line for its stdin.
  absl::StatusOr<std::string> TaskLine(const v1::Assign& task, const v1::Device& device,
                                       const TaskControl& control) const;
  /// The runner's thread count: the job's `threads`, else the config's, else the device's cores.
  int Threads(const v1::Assign& task, const v1::Device& device) const;

  RunnerConfig config_;
};

/// The runner shipped with hetbench: agent/runners/torch_runner.py next to
/// the source tree or installed under share/hetbench/runners; "" if neither.
std::string DefaultRunnerScript(const std::string& agent_executable);

}  // namespace hetbench::agent
