#include "agent/executors/machine_probe.h"

#include <torch/torch.h>

#include <algorithm>
#include <chrono>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/clock.h"

namespace hetbench::agent {

ProbeWindow TimeProbe(int64_t window_ns, int windows, int64_t gap_ns) {
  torch::NoGradGuard no_grad;
  torch::Generator gen = at::detail::createCPUGenerator(/*seed_val=*/20261130);
  const torch::Tensor a = torch::randn({64, 512}, gen, torch::kFloat32);
  const torch::Tensor b = torch::randn({512, 512}, gen, torch::kFloat32);
  torch::Tensor out = torch::empty({64, 512}, torch::kFloat32);
  for (int i = 0; i < 2; ++i) torch::mm_out(out, a, b);  // untimed: caches, the BLAS's threads awake
  ProbeWindow best;
  std::vector<int64_t> calls;
  calls.reserve(4096);
  for (int w = 0; w < windows; ++w) {
    if (w > 0) std::this_thread::sleep_for(std::chrono::nanoseconds(gap_ns));
    calls.clear();
    const int64_t end = SteadyNowNs() + window_ns;
    for (int64_t now = SteadyNowNs(); now < end || calls.size() < 5;) {
      torch::mm_out(out, a, b);
      const int64_t t = SteadyNowNs();
      calls.push_back(t - now);
      now = t;
    }
    const auto mid = calls.begin() + static_cast<std::ptrdiff_t>(calls.size() / 2);
    std::nth_element(calls.begin(), mid, calls.end());
    if (best.median_ns == 0 || *mid < best.median_ns) best.median_ns = *mid;
    best.calls += static_cast<int32_t>(calls.size());
  }
  return best;
}

std::string ProbeKernel(int threads) {
  return absl::StrCat("sgemm 64x512x512 float32, LibTorch, ", threads, threads == 1 ? " thread" : " threads");
}

}  // namespace hetbench::agent
