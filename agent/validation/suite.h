#pragma once
/// The validation suite an agent runs on one device (`hetbench validate`;
/// docs/validation.md): the tests of the device's kind (common/validate_spec),
/// each on a thread of its own and time-boxed. A test that cannot run on the
/// device is SKIPPED with its reason; one that errs or computes a wrong
/// result FAILED; one still running at its box TIMED_OUT (its thread is
/// abandoned, flagged to stop, and the device's other tests still run). A
/// task that is a rank of an all-reduce pair (task.gang) runs that one test
/// (agent/validation/allreduce.h). A TPU's tests, which the agent's
/// LibTorch cannot reach, run in the Python runner (PyTorch/XLA), each in a
/// runner of its own killed past its box (RunnerConfig's start-up allowance
/// added); its power sensors are read here as for any device.
/// The agent measures; the coordinator judges (server/validation/judge).

#include <functional>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "agent/executors/executor.h"
#include "common/clock.h"
#include "hetbench/v1/common.pb.h"

namespace hetbench::agent {

class PowerSampler;

struct ValidationConfig {
  int threads = 0;  // 0 = all cores of the device; a job's `threads` overrides
  std::string agent_version;
  PowerSampler* sampler = nullptr;  // the agent's power sampler; null: no sensors
  int64_t qpu_memory_limit_bytes = int64_t{8} << 30;
  std::string rendezvous_host = "127.0.0.1";  // this agent's end of an all-reduce pair's connections
  /// The Python runner (agent/executors/python_executor.h): a TPU's tests
  /// run there, one runner start per test; null: they are SKIPPED, with
  /// `runner_absent` (the probe's error) as the reason.
  std::shared_ptr<Executor> runner;
  std::string runner_absent = "no Python runner is configured (--python-runner)";
  /// The time boxes' clock (deadlines, the grace, a test's `seconds`); null:
  /// the steady clock. Tests drive a SimulatedClock. Measurements always use
  /// the steady clock.
  const Clock* box_clock = nullptr;
  /// Tests only: runs at the start of each test on its thread (a hang, a slowdown).
  std::function<void(const std::string& test)> before_test;
};

class ValidationExecutor final : public Executor {
 public:
  explicit ValidationExecutor(ValidationConfig config) : config_(std::move(config)) {}
  /// Runs the suite; the result holds `validation` (no phases, no samples).
  /// CANCELLED when control->cancel is set between tests.
  absl::StatusOr<v1::TaskResult> Run(const v1::Assign& task, const v1::Device& device, TaskControl* control) override;

 private:
  ValidationConfig config_;
};

}  // namespace hetbench::agent
