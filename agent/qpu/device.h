#pragma once
/// The qpu-sim device an agent offers: this project's state-vector
/// simulator on the host CPU.

#include "hetbench/v1/common.pb.h"

namespace hetbench::agent::qpu {

/// Largest qubit count whose single state of `bytes_per_amplitude` fits `limit_bytes`.
int MaxQubits(int64_t limit_bytes, int bytes_per_amplitude);

/// "qpu0": the simulator on `cpu`'s cores, states up to `memory_limit_bytes`.
v1::Device QpuSimDevice(const v1::Device& cpu, int64_t memory_limit_bytes);

}  // namespace hetbench::agent::qpu
