#pragma once
/// A Workload is what the executor runs for one model of the zoo: the data it
/// uses, one training step, one inference forward, and its test quality. The
/// executor's timing loop is the same for all of them.

#include <torch/torch.h>

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "agent/data/fashion_mnist.h"
#include "hetbench/v1/common.pb.h"

namespace hetbench::agent {

/// Running totals of test quality over inference batches.
struct QualityTotals {
  int64_t correct = 0;
  int64_t scored = 0;          // samples scored by accuracy
  double squared_error = 0;    // reconstruction models: sum of squared pixel errors
  int64_t error_values = 0;    // pixels summed in squared_error
};

class Workload {
 public:
  virtual ~Workload() = default;
  /// The images this workload trains and tests on, [N, features] rows; most
  /// use the dataset as it is.
  virtual const ImageDataset& Data() const = 0;
  virtual std::string Architecture() const = 0;
  virtual std::vector<torch::Tensor> Parameters() const = 0;
  /// Hash of what makes the initial model: weights (or the TorchScript file).
  virtual uint64_t InitialHash() const = 0;
  virtual void SetTraining(bool on) = 0;
  /// False when the model cannot be trained (a TorchScript module without `loss`).
  virtual bool Trainable() const { return true; }
  /// One whole optimisation step on a batch; returns the loss.
  virtual torch::Tensor TrainStep(const torch::Tensor& x, const torch::Tensor& y) = 0;
  /// The inference forward of a batch.
  virtual torch::Tensor Infer(const torch::Tensor& x) = 0;
  /// Adds one inference batch's quality to `q`.
  virtual void Score(const torch::Tensor& x, const torch::Tensor& y, const torch::Tensor& out, QualityTotals* q) = 0;
  /// The forward passes of one training step (for FLOP counting; called without autograd).
  virtual void TrainForwards(const torch::Tensor& x) { (void)Infer(x); }
  /// Top-level layers for per-layer timing; nullptr when the model is not one layer stack.
  virtual torch::nn::Sequential* Layers() { return nullptr; }
  /// A new optimizer of the kind and options TrainStep's own, over `params`
  /// (only with Layers(): the profiler times each layer's share of the step).
  virtual std::unique_ptr<torch::optim::Optimizer> NewOptimizer(std::vector<torch::Tensor> params) const {
    (void)params;
    return nullptr;
  }
  /// The training loss of the layer stack's output (only with Layers()).
  virtual torch::Tensor Loss(const torch::Tensor& out, const torch::Tensor& x, const torch::Tensor& y) const {
    (void)out, (void)x, (void)y;
    return {};
  }
  /// When a step clears its gradients: before its forward (as TrainStep
  /// does), or after its optimizer step, so that a later stage of a split
  /// across agents does it while it waits for the next activation instead of
  /// on the step's critical path (the next backward finds them cleared).
  enum class ClearGradients { kBeforeForward, kAfterStep };
  /// One optimisation step whose forward and backward are `forward_backward`
  /// (split execution runs them stage by stage); returns its loss.
  virtual torch::Tensor TrainStepWith(const std::function<torch::Tensor()>& forward_backward, ClearGradients clear) {
    (void)forward_backward, (void)clear;
    return {};
  }
  /// Runs `fn` in every TrainStep between the backward pass and the
  /// optimizer step (data parallel: the gradient all-reduce). Only layer
  /// stacks support it.
  virtual absl::Status SetAfterBackward(std::function<void()> fn) {
    (void)fn;
    return absl::UnimplementedError("this model cannot train data-parallel (not one layer stack)");
  }
  /// Anything a reader must know about the input (e.g. synthetic data).
  virtual std::string InputNote() const { return ""; }
  /// What a quantum model simulates per circuit; empty for classical models.
  virtual v1::QpuRun Qpu() const { return {}; }
  /// Moves the model (and its optimizer's parameters, in place) to `device`
  /// before the first step. Workloads that only run on the CPU refuse others.
  virtual absl::Status To(const torch::Device& device) {
    if (device.is_cpu()) return absl::OkStatus();
    return absl::UnimplementedError(
        absl::StrCat("this model runs on the CPU only in this version of hetbench, not on ", device.str()));
  }
};

/// "mlp/params=669706/shapes=<FNV-1a of \"512x784;512;...\">": the model's
/// architecture as both the C++ and the Python runner compute it (parameter
/// shapes in registration order), without weights or data.
std::string ArchitectureFingerprint(const std::string& model, const std::vector<torch::Tensor>& parameters);

/// Writes test_accuracy or test_mse from the totals.
void SetQuality(const QualityTotals& q, v1::TaskResult* result);

/// Builds `model` (one of KnownModels()) for `spec`, weights drawn from
/// spec.seed(). `ds` must outlive the workload. Errors name the model and why.
/// Quantum models refuse states larger than `qpu_memory_limit_bytes`.
absl::StatusOr<std::unique_ptr<Workload>> MakeWorkload(const std::string& model, const v1::JobSpec& spec,
                                                       const ImageDataset& ds,
                                                       int64_t qpu_memory_limit_bytes = int64_t{8} << 30);

/// The two Fashion-MNIST classes CycleGAN translates between.
inline constexpr int kCycleGanClassA = 7;  // sneaker
inline constexpr int kCycleGanClassB = 9;  // ankle boot

}  // namespace hetbench::agent
