#include "agent/executors/machine_probe.h"

#include <torch/torch.h>

#include <algorithm>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/clock.h"

namespace hetbench::agent {

ProbeWindow TimeProbe(int64_t window_ns) {
  torch::NoGradGuard no_grad;
  torch::Generator gen = at::detail::createCPUGenerator(/*seed_val=*/20261130);
  const torch::Tensor a = torch::randn({64, 512}, gen, torch::kFloat32);
  const torch::Tensor b = torch::randn({512, 512}, gen, torch::kFloat32);
  torch::Tensor out = torch::empty({64, 512}, torch::kFloat32);
  for (int i = 0; i < 2; ++i) torch::mm_out(out, a, b);  // untimed: caches, the BLAS's threads awake
  std::vector<int64_t> calls;
  calls.reserve(4096);
  const int64_t end = SteadyNowNs() + window_ns;
  for (int64_t now = SteadyNowNs(); now < end || calls.size() < 5;) {
    torch::mm_out(out, a, b);
    const int64_t t = SteadyNowNs();
    calls.push_back(t - now);
    now = t;
  }
  const auto mid = calls.begin() + static_cast<std::ptrdiff_t>(calls.size() / 2);
  std::nth_element(calls.begin(), mid, calls.end());
  return {*mid, static_cast<int32_t>(calls.size())};
}

std::string ProbeKernel(int threads) {
  return absl::StrCat("sgemm 64x512x512 float32, LibTorch, ", threads, threads == 1 ? " thread" : " threads");
}

}  // namespace hetbench::agent
