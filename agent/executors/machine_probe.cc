#include "agent/executors/machine_probe.h"

#include <torch/torch.h>

#include <algorithm>
#include <chrono>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/clock.h"

namespace hetbench::agent {

ProbeTimer::ProbeTimer() {
  torch::NoGradGuard no_grad;
  torch::Generator gen = at::detail::createCPUGenerator(/*seed_val=*/20261130);
  a_ = torch::randn({64, 512}, gen, torch::kFloat32);
  b_ = torch::randn({512, 512}, gen, torch::kFloat32);
  out_ = torch::empty({64, 512}, torch::kFloat32);
}

ProbeWindow ProbeTimer::Time(int64_t window_ns, int windows, int64_t gap_ns, int warm) {
  torch::NoGradGuard no_grad;
  for (int i = 0; i < warm; ++i) torch::mm_out(out_, a_, b_);  // untimed: caches, the BLAS's threads awake
  ProbeWindow best;
  std::vector<int64_t> calls;
  calls.reserve(4096);
  for (int w = 0; w < windows; ++w) {
    if (w > 0 && gap_ns > 0) std::this_thread::sleep_for(std::chrono::nanoseconds(gap_ns));
    calls.clear();
    const int64_t end = SteadyNowNs() + window_ns;
    for (int64_t now = SteadyNowNs(); now < end || calls.size() < 5;) {
      torch::mm_out(out_, a_, b_);
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

ProbeWindow TimeProbe(int64_t window_ns, int windows, int64_t gap_ns) {
  return ProbeTimer().Time(window_ns, windows, gap_ns, /*warm=*/2);
}

ProbeDuringRun::ProbeDuringRun(int64_t every_ns, int64_t task_start_ns, v1::MachineProbe* out)
    : every_ns_(every_ns), task_start_ns_(task_start_ns), next_ns_(SteadyNowNs() + every_ns), out_(out) {}

void ProbeDuringRun::Between(v1::Phase phase, int64_t step) {
  const int64_t now = SteadyNowNs();
  if (now >= next_ns_) Read(phase, step, now);
}

void ProbeDuringRun::BeforeWarmUp(v1::Phase phase) { Read(phase, 0, SteadyNowNs()); }

void ProbeDuringRun::Read(v1::Phase phase, int64_t step, int64_t now) {
  const ProbeWindow w = timer_.Time(/*window_ns=*/3'000'000, /*windows=*/2, /*gap_ns=*/0, /*warm=*/1);
  v1::ProbeReading* r = out_->add_during();
  r->set_phase(phase);
  r->set_step(step);
  r->set_median_ns(w.median_ns);
  r->set_at_ns(now - task_start_ns_);
  const int64_t end = SteadyNowNs();
  r->set_duration_ns(end - now);  // the coordinator leaves this out of the phase's energy and paid time
  next_ns_ = end + every_ns_;
}

std::string ProbeKernel(int threads) {
  return absl::StrCat("sgemm 64x512x512 float32, LibTorch, ", threads, threads == 1 ? " thread" : " threads");
}

}  // namespace hetbench::agent
