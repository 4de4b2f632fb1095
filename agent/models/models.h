#pragma once
/// The shared model zoo: one definition per model, used unchanged on every device.

#include <torch/torch.h>

#include <string>

#include "absl/status/statusor.h"

namespace hetbench::agent {

struct BuiltModel {
  torch::nn::Sequential net;
  std::string architecture;  // a stable text description, part of the fingerprint
  int64_t parameter_count = 0;
  uint64_t initial_weights_hash = 0;  // FNV-1a over the initial parameter bytes
};

/// Builds `name` with weights drawn after torch::manual_seed(seed).
/// INVALID_ARGUMENT for a name outside the zoo, naming the models that exist.
absl::StatusOr<BuiltModel> BuildModel(const std::string& name, uint64_t seed);

}  // namespace hetbench::agent
