#pragma once
/// The qpu-sim devices an agent offers: this project's state-vector
/// simulator on the host CPU, and its tensor backend on each GPU a CUDA
/// LibTorch can use.

#include "absl/status/statusor.h"
#include "hetbench/v1/common.pb.h"

namespace hetbench::agent::qpu {

/// Largest qubit count whose single state of `bytes_per_amplitude` fits `limit_bytes`.
int MaxQubits(int64_t limit_bytes, int bytes_per_amplitude);

/// "qpu0": the simulator on `cpu`'s cores, states up to `memory_limit_bytes`.
v1::Device QpuSimDevice(const v1::Device& cpu, int64_t memory_limit_bytes);

/// "qpu-<gpu id>": the simulator's tensor backend (tensor_backend.h) on GPU
/// `gpu`, states up to half its memory; only when `usable` (the tensor
/// backend can run on that CUDA device here), else FAILED_PRECONDITION with
/// the reason, naming the GPU. Runs qsim; qnn's adjoint layer is CPU-only.
absl::StatusOr<v1::Device> QpuSimGpuDevice(const v1::Device& gpu, const absl::Status& usable);

}  // namespace hetbench::agent::qpu
