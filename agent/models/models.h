#pragma once
/// The shared model zoo: one definition per model, used unchanged on every device.

#include <torch/torch.h>

#include <string>

#include "absl/status/statusor.h"

namespace hetbench::agent {

/// Every model takes a batch of flattened, normalised 28x28 images [N, 784]
/// and reshapes it itself, so the executor feeds all of them the same way.
struct BuiltModel {
  torch::nn::Sequential net;
  /// true: output is the reconstructed image [N, 784] in [0, 1], trained with
  /// MSE against the pixels; false: output is logits [N, 10], cross-entropy.
  bool reconstruction = false;
  std::string architecture;  // a stable text description, part of the fingerprint
  int64_t parameter_count = 0;
  uint64_t initial_weights_hash = 0;  // FNV-1a over the initial parameter bytes
};

/// Builds `name` with weights drawn after torch::manual_seed(seed).
/// INVALID_ARGUMENT for a name outside the zoo, naming the models that exist.
absl::StatusOr<BuiltModel> BuildModel(const std::string& name, uint64_t seed);

}  // namespace hetbench::agent
