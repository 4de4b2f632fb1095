#pragma once
/// The shared model's quantum variant `qnn`: a classical encoder (784 -> n),
/// angle encoding RY(pi sigmoid(x_q)) on each qubit, L variational layers
/// (RY, RZ on every qubit, then a ring of CZ between neighbours), <Z> of every
/// qubit, a linear head to 10 classes. A CZ ring entangles without turning
/// each <Z_q> into a parity of ever more qubits, as a CNOT cascade would
/// (measured: 0.79 test accuracy after one epoch against 0.55 with CNOTs).
/// The quantum layer is a LibTorch autograd function whose gradients come
/// from the adjoint method on the simulator. The states of a batch are
/// simulated together (qnn_batched.h): one vector loop over the samples per
/// gate, instead of one small state and one call per gate per sample.

#include <torch/torch.h>

#include <vector>

namespace hetbench::agent::qpu {

struct QnnShape {
  int qubits = 8;
  int layers = 2;
  /// The earlier simulator: one StateVector per sample, gate by gate. Kept
  /// as the oracle the batched one is tested against and as the bench's
  /// "before"; not part of the model's identity (same maths, same results).
  bool per_sample = false;
};

/// <Z_q> of the circuit for each sample: angles [B, n], weights [L, n, 2] -> [B, n] (float64 inside).
torch::Tensor QuantumExpectations(const torch::Tensor& angles, const torch::Tensor& weights);

/// d(sum_q g[b,q] <Z_q>_b)/d(angles, weights) by the adjoint method: one
/// forward and one backward sweep per sample.
void QuantumGradients(const torch::Tensor& angles, const torch::Tensor& weights, const torch::Tensor& grad_out,
                      torch::Tensor* grad_angles, torch::Tensor* grad_weights);

/// The quantum layer as a differentiable op.
torch::Tensor QuantumLayer(const torch::Tensor& angles, const torch::Tensor& weights);

/// The same three on one StateVector per sample (the reference).
torch::Tensor QuantumExpectationsPerSample(const torch::Tensor& angles, const torch::Tensor& weights);
void QuantumGradientsPerSample(const torch::Tensor& angles, const torch::Tensor& weights,
                               const torch::Tensor& grad_out, torch::Tensor* grad_angles,
                               torch::Tensor* grad_weights);
torch::Tensor QuantumLayerPerSample(const torch::Tensor& angles, const torch::Tensor& weights);

/// The variational circuit as a layer: encoder outputs [B, n] -> <Z> [B, n];
/// its weights [L, n, 2] start small (uniform in [-0.1, 0.1]), so each layer
/// starts near the identity and gradients do not vanish.
class QuantumCircuitImpl : public torch::nn::Module {
 public:
  explicit QuantumCircuitImpl(QnnShape shape);
  /// Encoder outputs become angles in (0, pi) through pi * sigmoid, where
  /// <Z> = cos(angle) is monotone: no sign of the encoding is lost.
  torch::Tensor forward(torch::Tensor x);
  void pretty_print(std::ostream& s) const override;

 private:
  QnnShape shape_;
  bool per_sample_ = false;
  torch::Tensor weights_;
};
TORCH_MODULE(QuantumCircuit);

/// qnn: Linear(784, n) - QuantumCircuit(n, L) - Linear(n, 10).
torch::nn::Sequential MakeQnn(QnnShape shape);

/// Gates in one sample's circuit: n encodings + L x (2n rotations + n CZs).
inline int64_t QnnGatesPerCircuit(const QnnShape& s) { return s.qubits + int64_t{s.layers} * 3 * s.qubits; }

}  // namespace hetbench::agent::qpu
