#pragma once
/// CycleGAN for 28x28 one-channel images: two ResNet-style generators
/// (A->B, B->A) and two PatchGAN discriminators, trained with least-squares
/// adversarial loss, cycle-consistency L1 (x10) and identity L1 (x5).

#include <torch/torch.h>

namespace hetbench::agent {

/// c7s1-32, d64, d128, 3 residual blocks of 128, u64, u32, c7s1-1 + tanh.
/// Input and output are images in [-1, 1], [N, 1, 28, 28].
torch::nn::Sequential CycleGanGenerator();

/// C64 (no norm) - C128 - C256 (stride 1) - 1-channel 4x4 conv: a 5x5 map of
/// real/fake scores, each seeing a patch of the 28x28 image.
torch::nn::Sequential PatchGanDiscriminator();

/// Losses of one full training step, for logging and the final-loss figure.
struct CycleGanLosses {
  torch::Tensor generator;
  torch::Tensor discriminator;
};

class CycleGan {
 public:
  /// Weights drawn after torch::manual_seed(seed). Adam(lr, betas 0.5/0.999) as in the paper.
  CycleGan(uint64_t seed, double learning_rate);

  /// One full step on unpaired batches a, b ([N, 1, 28, 28] in [-1, 1]):
  /// the generators' update, then both discriminators' updates.
  CycleGanLosses Step(const torch::Tensor& a, const torch::Tensor& b);

  torch::Tensor AToB(const torch::Tensor& a) { return g_ab_->forward(a); }
  torch::Tensor BToA(const torch::Tensor& b) { return g_ba_->forward(b); }
  /// The six discriminator forwards of a step (FLOP counting).
  void DiscriminatorForwards(const torch::Tensor& a, const torch::Tensor& b, const torch::Tensor& fake_a,
                             const torch::Tensor& fake_b);
  void SetTraining(bool on);
  std::vector<torch::Tensor> Parameters() const;
  std::string Architecture() const;

 private:
  torch::nn::Sequential g_ab_, g_ba_, d_a_, d_b_;
  std::unique_ptr<torch::optim::Adam> opt_g_, opt_d_;
};

}  // namespace hetbench::agent
