#pragma once
/// The machine probe: a fixed small SGEMM timed for a short window just
/// before a CPU task's training and just after its inference, outside every
/// timed window (v1::MachineProbe). On this project's VM the machine flips
/// into a state in which mlp's training steps took 31% longer for tens of
/// seconds; the probe took 16-19% longer then, whatever the model under
/// test, so `compare` can tell "the machine differed" from "the code
/// differed" (docs/measurement.md, "The machine probe").

#include <cstdint>
#include <string>

namespace hetbench::agent {

struct ProbeWindow {
  int64_t median_ns = 0;  // one kernel call
  int32_t calls = 0;
};

/// Times the probe kernel (a [64,512] x [512,512] float32 matrix product,
/// LibTorch, the process's current thread count) for `window_ns` after two
/// untimed calls; the median call. Deterministic inputs (a fixed seed of its
/// own, so the caller's random stream is untouched).
ProbeWindow TimeProbe(int64_t window_ns = 30'000'000);

/// What TimeProbe times, with the thread count: probes compare only when
/// this text is equal.
std::string ProbeKernel(int threads);

}  // namespace hetbench::agent
