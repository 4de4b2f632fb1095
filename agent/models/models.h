#pragma once
/// The shared model zoo: one definition per model, used unchanged on every device.

#include <torch/torch.h>

#include <string>

#include "absl/status/statusor.h"
#include "agent/qpu/qnn.h"

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

/// A Sequential with a concrete forward, so it can sit inside another
/// Sequential (LibTorch cannot nest plain Sequentials) and time as one layer.
class StageImpl : public torch::nn::SequentialImpl {
 public:
  using SequentialImpl::SequentialImpl;
  torch::Tensor forward(torch::Tensor x) { return SequentialImpl::forward(x); }
};
TORCH_MODULE(Stage);

/// Builds the layer-stack model `name` (mlp, cnn, rnn, lstm, autoencoder,
/// conv6, vgg16, resnet18, transformer) with weights drawn after
/// torch::manual_seed(seed). The 32x32 models (conv6, vgg16, resnet18) start
/// with a layer that pads the 28x28 image to 32x32 with background and
/// repeats it to 3 channels. INVALID_ARGUMENT for any other name.
/// `qnn` (the quantum variant) takes its qubits and layers from `qnn_shape`.
absl::StatusOr<BuiltModel> BuildModel(const std::string& name, uint64_t seed, qpu::QnnShape qnn_shape = {});

/// The normalised value of a black (0) pixel: what padding looks like.
double NormalizedBackground();

int64_t ParameterCount(const std::vector<torch::Tensor>& tensors);
/// FNV-1a over the bytes of the tensors, in order (initial-weight fingerprint).
uint64_t HashTensors(const std::vector<torch::Tensor>& tensors);

}  // namespace hetbench::agent
