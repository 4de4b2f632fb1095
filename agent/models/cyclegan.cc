#include "agent/models/cyclegan.h"

#include <sstream>

#include "agent/models/global_generator.h"
#include "agent/models/models.h"

namespace hetbench::agent {

namespace {

namespace nn = torch::nn;

nn::InstanceNorm2d Norm(int64_t c) { return nn::InstanceNorm2d(nn::InstanceNorm2dOptions(c)); }

class ResidualBlockImpl : public nn::Module {
 public:
  explicit ResidualBlockImpl(int64_t c)
      : body_(register_module("body", nn::Sequential(nn::ReflectionPad2d(1), nn::Conv2d(c, c, 3), Norm(c), nn::ReLU(),
                                                     nn::ReflectionPad2d(1), nn::Conv2d(c, c, 3), Norm(c)))) {}
  torch::Tensor forward(torch::Tensor x) { return x + body_->forward(x); }

 private:
  nn::Sequential body_;
};
TORCH_MODULE(ResidualBlock);

Stage Down(int64_t in, int64_t out) {
  return Stage(nn::Conv2d(nn::Conv2dOptions(in, out, 3).stride(2).padding(1)), Norm(out), nn::ReLU());
}

Stage Up(int64_t in, int64_t out) {
  return Stage(nn::ConvTranspose2d(nn::ConvTranspose2dOptions(in, out, 3).stride(2).padding(1).output_padding(1)),
                        Norm(out), nn::ReLU());
}

Stage DiscriminatorBlock(int64_t in, int64_t out, int64_t stride, bool norm) {
  Stage s(nn::Conv2d(nn::Conv2dOptions(in, out, 4).stride(stride).padding(1)));
  if (norm) s->push_back(Norm(out));
  s->push_back(nn::LeakyReLU(nn::LeakyReLUOptions().negative_slope(0.2)));
  return s;
}

torch::Tensor LeastSquares(const torch::Tensor& scores, double target) {
  return torch::mse_loss(scores, torch::full_like(scores, target));
}

}  // namespace

nn::Sequential CycleGanGenerator() {
  nn::Sequential g(nn::ReflectionPad2d(3), nn::Conv2d(1, 32, 7), Norm(32), nn::ReLU(),  // 28x28
                   Down(32, 64), Down(64, 128));                                        // 14x14, 7x7
  for (int i = 0; i < 3; ++i) g->push_back(ResidualBlock(128));
  g->push_back(Up(128, 64));  // 14x14
  g->push_back(Up(64, 32));   // 28x28
  g->push_back(nn::ReflectionPad2d(3));
  g->push_back(nn::Conv2d(32, 1, 7));
  g->push_back(nn::Tanh());
  return g;
}

nn::Sequential PatchGanDiscriminator() {
  return nn::Sequential(DiscriminatorBlock(1, 64, 2, false),    // 14x14
                        DiscriminatorBlock(64, 128, 2, true),   // 7x7
                        DiscriminatorBlock(128, 256, 1, true),  // 6x6
                        nn::Conv2d(nn::Conv2dOptions(256, 1, 4).padding(1)));  // 5x5
}

CycleGan::CycleGan(uint64_t seed, double learning_rate) {
  {
    SeededDraws alone;  // the weights are the seed's (global_generator.h)
    torch::manual_seed(seed);
    g_ab_ = CycleGanGenerator();
    g_ba_ = CycleGanGenerator();
    d_a_ = PatchGanDiscriminator();
    d_b_ = PatchGanDiscriminator();
  }
  const auto options = torch::optim::AdamOptions(learning_rate).betas({0.5, 0.999});
  std::vector<torch::Tensor> g_params = g_ab_->parameters(), d_params = d_a_->parameters();
  for (const auto& p : g_ba_->parameters()) g_params.push_back(p);
  for (const auto& p : d_b_->parameters()) d_params.push_back(p);
  opt_g_ = std::make_unique<torch::optim::Adam>(g_params, options);
  opt_d_ = std::make_unique<torch::optim::Adam>(d_params, options);
}

CycleGanLosses CycleGan::Step(const torch::Tensor& a, const torch::Tensor& b) {
  constexpr double kCycle = 10.0, kIdentity = 5.0;
  // Generators: fool both discriminators, map back to the input, leave the target domain alone.
  opt_g_->zero_grad();
  torch::Tensor fake_b = g_ab_->forward(a);
  torch::Tensor fake_a = g_ba_->forward(b);
  torch::Tensor adversarial = LeastSquares(d_b_->forward(fake_b), 1.0) + LeastSquares(d_a_->forward(fake_a), 1.0);
  torch::Tensor cycle = torch::l1_loss(g_ba_->forward(fake_b), a) + torch::l1_loss(g_ab_->forward(fake_a), b);
  torch::Tensor identity = torch::l1_loss(g_ab_->forward(b), b) + torch::l1_loss(g_ba_->forward(a), a);
  torch::Tensor g_loss = adversarial + kCycle * cycle + kIdentity * identity;
  g_loss.backward();
  opt_g_->step();

  // Discriminators: real scores towards 1, the generators' fakes towards 0.
  opt_d_->zero_grad();
  torch::Tensor d_loss = 0.5 * (LeastSquares(d_a_->forward(a), 1.0) + LeastSquares(d_a_->forward(fake_a.detach()), 0.0) +
                                LeastSquares(d_b_->forward(b), 1.0) + LeastSquares(d_b_->forward(fake_b.detach()), 0.0));
  d_loss.backward();
  opt_d_->step();
  return {g_loss.detach(), d_loss.detach()};
}

void CycleGan::DiscriminatorForwards(const torch::Tensor& a, const torch::Tensor& b, const torch::Tensor& fake_a,
                                     const torch::Tensor& fake_b) {
  for (const torch::Tensor* x : {&fake_a, &a, &fake_a}) (void)d_a_->forward(*x);
  for (const torch::Tensor* x : {&fake_b, &b, &fake_b}) (void)d_b_->forward(*x);
}

void CycleGan::SetTraining(bool on) {
  for (auto* m : {&g_ab_, &g_ba_, &d_a_, &d_b_}) (*m)->train(on);
}

std::vector<torch::Tensor> CycleGan::Parameters() const {
  std::vector<torch::Tensor> out;
  for (const auto* m : {&g_ab_, &g_ba_, &d_a_, &d_b_}) {
    for (const auto& p : (*m)->parameters()) out.push_back(p);
  }
  return out;
}

std::string CycleGan::Architecture() const {
  std::ostringstream s;
  s << "generators 2x " << *g_ab_ << "\ndiscriminators 2x " << *d_a_;
  return s.str();
}

}  // namespace hetbench::agent
