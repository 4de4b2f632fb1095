#pragma once
/// The machine probe: a fixed small SGEMM timed in three short windows just
/// before a CPU task's training (or serving) and just after its inference
/// (or serving), outside every timed window (v1::MachineProbe). On this
/// project's VM the machine flips
/// into a state in which mlp's training steps took 31% longer for tens of
/// seconds; the probe took 16-19% longer then, whatever the model under
/// test, so `compare` can tell "the machine differed" from "the code
/// differed" (docs/measurement.md, "The machine probe").

#include <torch/torch.h>

#include <cstdint>
#include <string>

#include "hetbench/v1/common.pb.h"

namespace hetbench::agent {

struct ProbeWindow {
  int64_t median_ns = 0;  // one kernel call: the lowest of the windows' median calls
  int32_t calls = 0;      // over all windows
};

/// Times the probe kernel (a [64,512] x [512,512] float32 matrix product,
/// LibTorch, the process's current thread count) after two untimed calls,
/// in `windows` windows of `window_ns`, `gap_ns` apart; the lowest of their
/// median calls. With 2 threads the kernel needs both cores, so anything
/// else runnable for a moment (in the agent, its own streams at a task's
/// start) stalls every call of a window: in an agent on this VM one 30 ms
/// window of four took 6.1 ms a call against 0.09 ms, and windows at a
/// task's start ran 1-9% slower than after it. A machine state lasts tens
/// of seconds and holds in every window; a moment's stall does not.
/// Deterministic inputs (a fixed seed of its own, so the caller's random
/// stream is untouched).
ProbeWindow TimeProbe(int64_t window_ns = 10'000'000, int windows = 3, int64_t gap_ns = 20'000'000);

/// The probe's kernel with its inputs made once: what TimeProbe and
/// ProbeDuringRun time.
class ProbeTimer {
 public:
  ProbeTimer();
  /// After `warm` untimed calls, `windows` windows of `window_ns`, `gap_ns` apart.
  ProbeWindow Time(int64_t window_ns, int windows, int64_t gap_ns, int warm);

 private:
  torch::Tensor a_, b_, out_;
};

/// The probe read during a run, between its steps: the run's loops call
/// Between before each measured step; every `every_ns` (from construction,
/// then from the end of the last reading) it times the kernel in two 3 ms
/// windows (one untimed call first) and appends the reading, with the
/// phase and step it preceded, when and for how long, to `out->during`.
/// Steps before and after a reading compare only with the reading's cost
/// outside their windows; the coordinator takes its time and energy out of
/// the phase's energy and cost (server/ingest/energy_cost.cc).
class ProbeDuringRun {
 public:
  ProbeDuringRun(int64_t every_ns, int64_t task_start_ns, v1::MachineProbe* out);
  void Between(v1::Phase phase, int64_t step);
  /// A reading now, labelled with `phase` and step 0, whatever the time
  /// since the last: the run calls it before a phase's warm-up, so that a
  /// phase as short as inference (0.1 s) has a reading of its own and its
  /// warm-up steps, not its measured ones, follow the probe's SGEMM.
  void BeforeWarmUp(v1::Phase phase);

 private:
  void Read(v1::Phase phase, int64_t step, int64_t now);

  ProbeTimer timer_;
  const int64_t every_ns_, task_start_ns_;
  int64_t next_ns_;
  v1::MachineProbe* out_;
};

/// What TimeProbe times, with the thread count: probes compare only when
/// this text is equal.
std::string ProbeKernel(int threads);

}  // namespace hetbench::agent
