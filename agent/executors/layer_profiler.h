#pragma once
/// Per-layer timing of a layer stack, and FLOP counting with LibTorch's profiler.

#include <torch/torch.h>

#include <functional>
#include <memory>
#include <vector>

#include "hetbench/v1/common.pb.h"

namespace hetbench::agent {

/// FLOPs LibTorch's profiler attributes to the operators `fn` runs (matrix
/// products, convolutions, element-wise add/mul), on this thread.
double CountFlops(const std::function<void()>& fn);

/// Loss of the stack's output for a batch (x, y).
using LossFn = std::function<torch::Tensor(const torch::Tensor& out, const torch::Tensor& x, const torch::Tensor& y)>;

/// Where layer windows go on the task's time axis, and the optional repeat
/// loops that make a layer visible to a slow power sensor.
struct LayerEnergyOptions {
  int64_t origin_ns = 0;  // the task start (steady clock): windows are relative to it
  double seconds = 0;     // > 0: each layer alone, per phase, for this long
};

/// A new optimizer like the training step's, over the parameters given.
using OptimizerFactory = std::function<std::unique_ptr<torch::optim::Optimizer>(std::vector<torch::Tensor>)>;

/// Times every top-level layer of `net` over `steps` batches drawn in order
/// from (images, labels): the training-mode forward, its share of the
/// backward (from the moment the gradient of its output is ready to the
/// moment the gradient of its input is, measured by hooks on the layer
/// outputs, with a device synchronisation in each), and the eval-mode
/// forward without autograd. No optimizer step runs: weights do not change.
/// Layers whose output needs no gradient (before the first layer with
/// parameters) have no backward share (count 0). Every timed stretch is also
/// kept as a LayerWindow for the coordinator's per-layer energy; with
/// `energy.seconds` > 0 each layer is then run alone in a loop per phase.
/// With `optimizer`, each layer with parameters also gets its share of the
/// optimizer step (LayerTiming.optimizer): zero_grad and step of a fresh
/// optimizer over its parameters alone, on zero gradients, the weights
/// restored after.
std::vector<v1::LayerTiming> ProfileLayers(torch::nn::Sequential& net, const LossFn& loss, const torch::Tensor& images,
                                           const torch::Tensor& labels, int64_t batch_size, int steps,
                                           const torch::Device& device, const LayerEnergyOptions& energy = {},
                                           const OptimizerFactory& optimizer = {});

}  // namespace hetbench::agent
