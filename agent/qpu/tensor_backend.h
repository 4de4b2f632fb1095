#pragma once
/// The simulator on LibTorch tensors: the same blocks (kernels.h) applied
/// with tensor operations on any torch::Device, so a host with a GPU runs
/// circuits on it through a CUDA LibTorch build with no CUDA code of ours.
/// A dense block is a permute that brings its qubits last, a matmul of the
/// [2^(n-k), 2^k] view with the block's transpose, and the inverse permute;
/// a diagonal block is a broadcast multiply. The native SIMD kernels stay
/// the CPU default; this backend is tested on the CPU for equality with them.

#include <torch/torch.h>

#include "absl/status/statusor.h"
#include "agent/qpu/circuit.h"
#include "agent/qpu/kernels.h"

namespace hetbench::agent::qpu {

class TensorState {
 public:
  /// |0...0> on `device` as complex64 (`is_double` false) or complex128,
  /// refused past `memory_limit_bytes` like StateVector.
  static absl::StatusOr<TensorState> Create(int qubits, torch::Device device, bool is_double,
                                            int64_t memory_limit_bytes);

  int qubits() const { return n_; }
  const torch::Tensor& amplitudes() const { return state_; }  // [2^n], qubit 0 the least significant bit
  int64_t bytes() const { return state_.numel() * state_.element_size(); }

  void Reset();
  void Apply(const kernels::Block& block);
  void Run(const Program& p) {
    for (const kernels::Block& b : p.blocks) Apply(b);
  }
  /// <Z_q>, computed on the device, returned to the host.
  double ExpectationZ(int q) const;

 private:
  TensorState(int qubits, torch::Tensor state) : n_(qubits), state_(std::move(state)) {}
  torch::Tensor Matrix(const kernels::Block& b) const;  // the block's entries on the state's device and dtype

  int n_;
  torch::Tensor state_;
};

/// Whether the tensor backend can run on `device` here (CUDA needs a CUDA
/// LibTorch build and a visible device), and why not.
absl::Status TensorBackendUsable(const torch::Device& device);

}  // namespace hetbench::agent::qpu
