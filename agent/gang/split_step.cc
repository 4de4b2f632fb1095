#include "agent/gang/split_step.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "agent/devices/accelerators.h"
#include "agent/devices/cuda.h"
#include "common/clock.h"
#include "common/job_spec.h"
#include "common/stats.h"

namespace hetbench::agent {

absl::StatusOr<std::vector<SplitStagePlan>> PlanSplit(const v1::SplitSpec& split, size_t layers,
                                                      const std::vector<v1::Device>& devices) {
  if (devices.size() != static_cast<size_t>(split.stages_size())) {
    return absl::InvalidArgumentError(
        absl::StrCat("split: ", split.stages_size(), " stages but ", devices.size(), " devices assigned"));
  }
  std::vector<SplitStagePlan> plan;
  int next = 0;
  for (int s = 0; s < split.stages_size(); ++s) {
    auto range = ParseLayerRange(split.stages(s).layers());
    if (!range.ok()) return range.status();
    SplitStagePlan p;
    p.begin = range->begin;
    p.end = range->end < 0 ? static_cast<int>(layers) : range->end;
    if (p.begin != next || p.end > static_cast<int>(layers) || p.end <= p.begin) {
      return absl::InvalidArgumentError(absl::StrCat("split.stages[", s, "].layers = \"", split.stages(s).layers(),
                                                     "\": the model has layers 0-", layers - 1,
                                                     "; stages must cover them in order"));
    }
    next = p.end;
    p.info = devices[s];
    if (devices[s].kind() == v1::DEVICE_KIND_GPU) {
      p.device = torch::Device(torch::kCUDA, static_cast<c10::DeviceIndex>(std::max(CudaIndex(devices[s]), 0)));
    }
    plan.push_back(std::move(p));
  }
  if (next != static_cast<int>(layers)) {
    return absl::InvalidArgumentError(absl::StrCat("split: the stages end at layer ", next - 1, " of 0-", layers - 1,
                                                   "; the last stage must reach the last layer (e.g. \"4-\")"));
  }
  return plan;
}

torch::Tensor SplitForwardBackward(torch::nn::Sequential& net, const std::vector<SplitStagePlan>& plan,
                                   const torch::Tensor& x, const torch::Tensor& y, const LossFn& loss,
                                   StageTimes* times) {
  std::fill(times, times + plan.size(), StageTimes{});
  std::vector<torch::Tensor> inputs(plan.size()), outputs(plan.size());
  torch::Tensor a = x.to(plan[0].device);
  for (size_t s = 0; s < plan.size(); ++s) {
    if (s > 0) {
      // The activation crosses to the next stage's device: sender's and receiver's transfer.
      const int64_t t0 = SteadyNowNs();
      torch::Tensor moved = a.detach().to(plan[s].device);
      SyncDevice(plan[s].device);
      const int64_t dt = SteadyNowNs() - t0;
      const int64_t bytes = a.numel() * static_cast<int64_t>(a.element_size());
      times[s - 1].transfer_ns += dt, times[s - 1].transfer_bytes += bytes;
      times[s].transfer_ns += dt, times[s].transfer_bytes += bytes;
      a = moved.requires_grad_(true);
    }
    inputs[s] = a;
    const int64_t t0 = SteadyNowNs();
    for (int i = plan[s].begin; i < plan[s].end; ++i) a = net->begin()[i].forward<torch::Tensor>(a);
    SyncDevice(plan[s].device);
    times[s].forward_ns = SteadyNowNs() - t0;
    outputs[s] = a;
  }
  const torch::Device last = plan.back().device;
  torch::Tensor l;
  for (size_t s = plan.size(); s-- > 0;) {
    const int64_t t0 = SteadyNowNs();
    if (s + 1 == plan.size()) {
      l = loss(a, x.to(last), y.to(last));
      l.backward();
    } else {
      const int64_t c0 = SteadyNowNs();
      torch::Tensor g = inputs[s + 1].grad().to(plan[s].device);
      SyncDevice(plan[s].device);
      const int64_t dt = SteadyNowNs() - c0;
      const int64_t bytes = g.numel() * static_cast<int64_t>(g.element_size());
      times[s].transfer_ns += dt, times[s].transfer_bytes += bytes;
      times[s + 1].transfer_ns += dt, times[s + 1].transfer_bytes += bytes;
      outputs[s].backward(g);
      times[s].backward_ns -= dt;  // counted as transfer, not compute
    }
    SyncDevice(plan[s].device);
    times[s].backward_ns += SteadyNowNs() - t0;
  }
  return l;
}

std::vector<v1::SplitStageResult> SummarizeSplit(const std::vector<SplitStagePlan>& plan,
                                                 const std::vector<StageTimes>& times,
                                                 const std::vector<int64_t>& step_ns) {
  std::vector<v1::SplitStageResult> out;
  std::vector<double> steps_ns(step_ns.begin(), step_ns.end());
  const double step = MedianInPlace(steps_ns);
  const size_t steps = plan.empty() ? 0 : std::min(times.size() / plan.size(), step_ns.size());
  for (size_t s = 0; s < plan.size(); ++s) {
    std::vector<double> fwd, bwd, xfer, idle;
    int64_t bytes = 0;
    for (size_t k = 0; k < steps; ++k) {
      const StageTimes& t = times[k * plan.size() + s];
      fwd.push_back(t.forward_ns);
      bwd.push_back(t.backward_ns);
      xfer.push_back(t.transfer_ns);
      idle.push_back(static_cast<double>(std::max<int64_t>(0, step_ns[k] - t.forward_ns - t.backward_ns - t.transfer_ns)));
      bytes = t.transfer_bytes;
    }
    v1::SplitStageResult r;
    r.set_stage(static_cast<int>(s));
    r.set_layers(absl::StrCat(plan[s].begin, "-", plan[s].end - 1));
    r.set_device_id(plan[s].info.id());
    r.set_device_kind(plan[s].info.kind());
    r.set_forward_ns(MedianInPlace(fwd));
    r.set_backward_ns(MedianInPlace(bwd));
    r.set_transfer_ns(MedianInPlace(xfer));
    r.set_transfer_bytes(bytes);
    r.set_idle_ns(MedianInPlace(idle));
    r.set_step_ns(step);
    out.push_back(std::move(r));
  }
  return out;
}

}  // namespace hetbench::agent
