#pragma once
/// The shared model's quantum variant `qnn`: a classical encoder (784 -> n),
/// angle encoding RY(x_q) on each qubit, L variational layers (RY, RZ on
/// every qubit, then a CNOT ring), <Z> of every qubit, a linear head to 10
/// classes. The quantum layer is a LibTorch autograd function whose gradients
/// come from the adjoint method on the simulator.

#include <torch/torch.h>

#include <vector>

namespace hetbench::agent::qpu {

struct QnnShape {
  int qubits = 8;
  int layers = 2;
};

/// <Z_q> of the circuit for each sample: angles [B, n], weights [L, n, 2] -> [B, n] (float64 inside).
torch::Tensor QuantumExpectations(const torch::Tensor& angles, const torch::Tensor& weights);

/// d(sum_q g[b,q] <Z_q>_b)/d(angles, weights) by the adjoint method: one
/// forward and one backward sweep per sample.
void QuantumGradients(const torch::Tensor& angles, const torch::Tensor& weights, const torch::Tensor& grad_out,
                      torch::Tensor* grad_angles, torch::Tensor* grad_weights);

/// The quantum layer as a differentiable op.
torch::Tensor QuantumLayer(const torch::Tensor& angles, const torch::Tensor& weights);

class QnnImpl : public torch::nn::Module {
 public:
  explicit QnnImpl(QnnShape shape);
  torch::Tensor forward(torch::Tensor x);
  const QnnShape& shape() const { return shape_; }
  /// Gates in one sample's circuit.
  int64_t GatesPerCircuit() const { return shape_.qubits + shape_.layers * 3 * shape_.qubits; }

 private:
  QnnShape shape_;
  torch::nn::Linear encoder_{nullptr}, head_{nullptr};
  torch::Tensor weights_;
};
TORCH_MODULE(Qnn);

}  // namespace hetbench::agent::qpu
