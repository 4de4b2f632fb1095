#pragma once
/// qnn's circuit simulated for a whole batch at once. The states of a chunk
/// of samples share one layout, amplitude-major with the sample index
/// fastest and real and imaginary parts apart (re[i * B + b], im[i * B + b]),
/// so every gate is one vector loop across the samples: shared weights are
/// broadcast, each sample's encoding angle is a lane of its own, and no
/// per-sample call, allocation or gate list remains. The loops are compiled
/// for AVX-512, AVX2 and the baseline and chosen at run time (GCC
/// target_clones). Chunks of samples run on LibTorch's threads.

#include <torch/torch.h>

namespace hetbench::agent::qpu {

/// <Z_q> for each sample: angles [B, n], weights [L, n, 2] -> [B, n] (float64).
/// When `states` is given it receives the final states, [B/chunk pieces
/// packed as the layout above], for BatchedGradients.
torch::Tensor BatchedExpectations(const torch::Tensor& angles, const torch::Tensor& weights, torch::Tensor* states);

/// Adjoint gradients of sum_{b,q} grad_out[b,q] <Z_q>_b, starting from the
/// final `states` of BatchedExpectations (or simulating them when undefined).
void BatchedGradients(const torch::Tensor& angles, const torch::Tensor& weights, const torch::Tensor& grad_out,
                      const torch::Tensor& states, torch::Tensor* grad_angles, torch::Tensor* grad_weights);

}  // namespace hetbench::agent::qpu
