#pragma once
/// Executors run one task on one device.

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include "absl/status/statusor.h"
#include "agent/executors/sample_buffer.h"
#include "common/clock.h"
#include "hetbench/v1/agent.pb.h"
#include "hetbench/v1/common.pb.h"

namespace hetbench::agent {

/// Shared between the executor (writer) and the agent's sender thread
/// (reader). Everything here is lock-free; the executor never blocks on I/O.
struct TaskControl {
  explicit TaskControl(size_t sample_capacity, int64_t start_ns) : samples(sample_capacity), task_start_ns(start_ns) {}
  SampleBuffer samples;
  /// Steady-clock origin of every timestamp of the task (samples, windows, power).
  const int64_t task_start_ns;
  std::atomic<int> phase{0};            // v1::Phase being run
  std::atomic<int64_t> step{0};         // steps done in the current phase
  std::atomic<int64_t> total_steps{0};  // expected steps in the current phase (estimate)
  std::atomic<bool> cancel{false};      // set by the agent; the executor stops soon after
  /// Split tasks: the agent's devices of stages 1.. (Assign.stage_device_ids).
  std::vector<v1::Device> stage_devices;
  /// This agent's clock against the coordinator's (heartbeat echoes): a
  /// serving replica's start is agreed on the coordinator's clock. Unset in
  /// tests that need none.
  std::function<v1::ClockSync()> clock;
};

/// Runs one task. Run() is called on a dedicated task thread, one task per
/// device at a time; it must return promptly after control->cancel is set.
class Executor {
 public:
  virtual ~Executor() = default;
  /// Returns the result (phases left empty: the coordinator aggregates them
  /// from the samples) with the wall window of each phase it ran, relative to
  /// control->task_start_ns. CANCELLED when stopped by control->cancel.
  virtual absl::StatusOr<v1::TaskResult> Run(const v1::Assign& task, const v1::Device& device,
                                             TaskControl* control) = 0;
};

/// Capacity a task's sample buffer needs: measured training steps plus test-set batches.
size_t SampleCapacity(const v1::Assign& task);

}  // namespace hetbench::agent
