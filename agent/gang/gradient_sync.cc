#include "agent/gang/gradient_sync.h"

#include <torch/csrc/distributed/c10d/ProcessGroup.hpp>

#include "common/clock.h"

namespace hetbench::agent {

absl::StatusOr<std::unique_ptr<GradientSync>> GradientSync::Join(const v1::GangAssign& gang,
                                                                  const std::string& own_host) {
  auto group = GangGroup::Join(gang, own_host);
  if (!group.ok()) return group.status();
  return std::unique_ptr<GradientSync>(new GradientSync(*std::move(group)));
}

double GradientSync::AllReduce(const std::vector<torch::Tensor>& params, double vote) {
  int64_t numel = 1;  // the vote
  for (const torch::Tensor& p : params) numel += p.numel();
  if (!buffer_.defined() || buffer_.numel() != numel) {
    buffer_ = torch::empty({numel}, torch::TensorOptions().dtype(torch::kFloat32));
    bytes_per_step_ = numel * static_cast<int64_t>(sizeof(float));
  }
  const int world = world_size();
  const int64_t start_ns = SteadyNowNs();
  {
    torch::NoGradGuard no_grad;
    int64_t at = 0;
    for (const torch::Tensor& p : params) {
      auto slice = buffer_.narrow(0, at, p.numel());
      if (p.grad().defined()) {
        slice.copy_(p.grad().reshape({-1}));
      } else {
        slice.zero_();
      }
      at += p.numel();
    }
    buffer_[at] = static_cast<float>(vote);
    if (world > 1) {
      std::vector<at::Tensor> tensors{buffer_};
      group_->group()->allreduce(tensors)->wait();
      buffer_.narrow(0, 0, at).div_(static_cast<double>(world));
    }
    at = 0;
    for (const torch::Tensor& p : params) {
      if (p.grad().defined()) p.mutable_grad().copy_(buffer_.narrow(0, at, p.numel()).view_as(p));
      at += p.numel();
    }
  }
  last_ns_ = SteadyNowNs() - start_ns;
  return buffer_[buffer_.numel() - 1].item<double>();
}

}  // namespace hetbench::agent
