#include "agent/executors/layer_profiler.h"

#include <torch/csrc/autograd/profiler_legacy.h>
#include <torch/cuda.h>

#include <sstream>

#include "agent/devices/cuda.h"
#include "agent/models/global_generator.h"
#include "common/clock.h"
#include "common/stats.h"

namespace hetbench::agent {

namespace {

std::string ShortName(const torch::nn::Module& m) {
  std::ostringstream s;
  m.pretty_print(s);
  std::string name = s.str();
  const size_t nl = name.find('\n');
  if (nl != std::string::npos) name = name.substr(0, nl);
  if (name.rfind("torch::nn::", 0) == 0) name = name.substr(11);
  if (name.size() > 72) name = name.substr(0, 69) + "...";
  return name;
}

v1::LayerWindow* AddWindow(v1::LayerTiming* t, v1::Phase phase, int64_t start_ns, int64_t end_ns, int32_t passes,
                           int64_t batch_size) {
  v1::LayerWindow* w = t->add_windows();
  w->set_phase(phase);
  w->set_start_ns(start_ns);
  w->set_end_ns(end_ns);
  w->set_passes(passes);
  w->set_batch_size(batch_size);
  return w;
}

v1::TimingStats Stats(const std::vector<int64_t>& durations, int64_t batch_size) {
  std::vector<StepSample> steps;
  steps.reserve(durations.size());
  int64_t t = 0;
  for (int64_t d : durations) {
    steps.push_back({t, d, static_cast<int32_t>(batch_size)});
    t += d;
  }
  return ComputeTimingStats(steps);
}

// Runs x through every layer, timing each between device synchronisations
// into times[layer] and windows[layer] (relative to `origin_ns`); `after`
// sees each layer's output.
torch::Tensor TimeEachLayer(torch::nn::Sequential& net, const torch::Tensor& x, const torch::Device& device,
                            v1::Phase phase, int64_t origin_ns, std::vector<std::vector<int64_t>>& times,
                            std::vector<v1::LayerTiming>& out,
                            const std::function<void(size_t, torch::Tensor&)>& after = {}) {
  torch::Tensor h = x;
  size_t i = 0;
  SyncDevice(device);
  for (auto& layer : *net) {
    const int64_t t0 = SteadyNowNs();
    h = layer.forward<torch::Tensor>(h);
    SyncDevice(device);
    const int64_t t1 = SteadyNowNs();
    times[i].push_back(t1 - t0);
    AddWindow(&out[i], phase, t0 - origin_ns, t1 - origin_ns, 1, x.size(0));
    if (after) after(i, h);
    ++i;
  }
  return h;
}

// Runs `pass` back to back until `seconds` have passed (at least once) and
// records the whole stretch as one window of N passes.
void RepeatLayer(const std::function<void()>& pass, double seconds, const torch::Device& device, v1::Phase phase,
                 int64_t origin_ns, int64_t batch_size, v1::LayerTiming* out) {
  const int64_t span = static_cast<int64_t>(seconds * 1e9);
  SyncDevice(device);
  const int64_t t0 = SteadyNowNs();
  int32_t passes = 0;
  int64_t t1 = t0;
  do {
    pass();
    ++passes;
    // Synchronise only now and then: a CUDA launch queue must not run ahead
    // of the clock by more than a few passes.
    if (passes % 8 == 0 || !device.is_cuda()) {
      SyncDevice(device);
      t1 = SteadyNowNs();
    }
  } while (t1 - t0 < span);
  SyncDevice(device);
  t1 = SteadyNowNs();
  AddWindow(out, phase, t0 - origin_ns, t1 - origin_ns, passes, batch_size)->set_repeated_loop(true);
}

}  // namespace

double CountFlops(const std::function<void()>& fn) {
  namespace prof = torch::autograd::profiler;
  prof::ProfilerConfig config(torch::profiler::impl::ProfilerState::CPU, /*report_input_shapes=*/true,
                              /*profile_memory=*/false, /*with_stack=*/false, /*with_flops=*/true,
                              /*with_modules=*/false);
  prof::enableProfilerLegacy(config);
  try {
    fn();
  } catch (...) {
    (void)prof::disableProfilerLegacy();
    throw;
  }
  double flops = 0;
  for (auto& thread_events : prof::disableProfilerLegacy()) {
    for (auto& e : thread_events) {
      if (e.kind() == prof::EventKind::PushRange) flops += static_cast<double>(e.flops());
    }
  }
  return flops;
}

namespace {

// Each layer alone, on its real input (the batch-0 output of the layers
// before it): forward + backward in training mode, then the eval forward,
// each repeated for `energy.seconds`. The upstream gradient is ones of the
// output's shape: the same work as the real one.
void RepeatEachLayer(torch::nn::Sequential& net, const torch::Tensor& images, int64_t batch_size,
                     const torch::Device& device, const LayerEnergyOptions& energy, std::vector<v1::LayerTiming>& out) {
  const torch::Tensor x0 = images.slice(0, 0, batch_size).to(device);
  net->train();
  {
    torch::Tensor h = x0;
    bool input_needs_grad = false;
    size_t i = 0;
    for (auto& layer : *net) {
      UnseededDraws dropout(device.is_cpu());  // this layer's repeats (global_generator.h)
      torch::Tensor in = h.detach();
      if (input_needs_grad) in.requires_grad_(true);
      torch::Tensor probe = layer.forward<torch::Tensor>(in);
      const bool backward = probe.requires_grad();
      const torch::Tensor upstream = torch::ones_like(probe);
      RepeatLayer(
          [&] {
            torch::Tensor o = layer.forward<torch::Tensor>(in);
            if (backward) o.backward(upstream);
          },
          energy.seconds, device, v1::PHASE_TRAIN, energy.origin_ns, batch_size, &out[i]);
      input_needs_grad = backward;
      h = probe.detach();
      ++i;
    }
    for (auto& p : net->parameters()) p.mutable_grad() = torch::Tensor();
  }
  net->eval();
  torch::NoGradGuard no_grad;
  torch::Tensor h = x0;
  size_t i = 0;
  for (auto& layer : *net) {
    const torch::Tensor in = h;
    RepeatLayer([&] { (void)layer.forward<torch::Tensor>(in); }, energy.seconds, device, v1::PHASE_INFER,
                energy.origin_ns, batch_size, &out[i]);
    h = layer.forward<torch::Tensor>(in);
    ++i;
  }
}

// Each layer's share of the optimizer step, `steps` times: a fresh optimizer
// over its parameters alone, stepped once untimed (its state is allocated on
// the first step), then zero_grad + step timed, as the training step runs
// them. The gradients are zeros; the weights are saved before and restored
// after, whatever the optimizer does with zeros.
void TimeOptimizerShares(torch::nn::Sequential& net, const OptimizerFactory& optimizer, int steps, int64_t batch_size,
                         const torch::Device& device, std::vector<v1::LayerTiming>& out) {
  size_t i = 0;
  for (auto& layer : *net) {
    std::vector<torch::Tensor> params = layer.ptr()->parameters();
    std::unique_ptr<torch::optim::Optimizer> opt = params.empty() ? nullptr : optimizer(params);
    if (opt != nullptr) {
      std::vector<torch::Tensor> saved;
      for (auto& p : params) saved.push_back(p.detach().clone());
      for (auto& p : params) p.mutable_grad() = torch::zeros_like(p);
      opt->step();
      std::vector<int64_t> times;
      for (int s = 0; s < steps; ++s) {
        SyncDevice(device);
        const int64_t t0 = SteadyNowNs();
        opt->zero_grad();
        opt->step();
        SyncDevice(device);
        times.push_back(SteadyNowNs() - t0);
      }
      *out[i].mutable_optimizer() = Stats(times, batch_size);
      torch::NoGradGuard no_grad;
      for (size_t k = 0; k < params.size(); ++k) {
        params[k].mutable_grad() = torch::Tensor();
        params[k].copy_(saved[k]);
      }
    }
    ++i;
  }
}

}  // namespace

std::vector<v1::LayerTiming> ProfileLayers(torch::nn::Sequential& net, const LossFn& loss, const torch::Tensor& images,
                                           const torch::Tensor& labels, int64_t batch_size, int steps,
                                           const torch::Device& device, const LayerEnergyOptions& energy,
                                           const OptimizerFactory& optimizer) {
  const size_t n = net->size();
  std::vector<std::vector<int64_t>> forward(n), backward(n), inference(n);
  std::vector<v1::LayerTiming> out(n);
  const int64_t origin = energy.origin_ns;
  const int64_t rows = images.size(0);
  auto batch = [&](int step, torch::Tensor* x, torch::Tensor* y) {
    const int64_t lo = (static_cast<int64_t>(step) * batch_size) % std::max<int64_t>(1, rows - batch_size + 1);
    *x = images.slice(0, lo, lo + batch_size).to(device);
    *y = labels.slice(0, lo, lo + batch_size).to(device);
  };
  net->train();
  for (int step = 0; step < steps; ++step) {
    torch::Tensor x, y;
    batch(step, &x, &y);
    UnseededDraws dropout(device.is_cpu());  // before the step's layers are timed (global_generator.h)
    std::vector<int64_t> grad_ready(n, 0);
    torch::Tensor h = TimeEachLayer(net, x, device, v1::PHASE_TRAIN, origin, forward, out, [&](size_t i, torch::Tensor& o) {
      if (!o.requires_grad()) return;
      o.register_hook([&grad_ready, &device, i](torch::Tensor) {
        SyncDevice(device);
        grad_ready[i] = SteadyNowNs();
      });
    });
    torch::Tensor l = loss(h, x, y);
    for (auto& p : net->parameters()) {
      if (p.grad().defined()) p.mutable_grad().zero_();
    }
    l.backward();
    SyncDevice(device);
    const int64_t end = SteadyNowNs();
    // Layer i's backward runs from its output's gradient to the next earlier
    // hooked output's gradient (its input's), or to the end of backward().
    for (size_t j = 0; j < n; ++j) {
      if (grad_ready[j] == 0) continue;
      int64_t until = end;
      for (size_t e = j; e-- > 0;) {
        if (grad_ready[e] != 0) {
          until = grad_ready[e];
          break;
        }
      }
      backward[j].push_back(until - grad_ready[j]);
      AddWindow(&out[j], v1::PHASE_TRAIN, grad_ready[j] - origin, until - origin, 0, batch_size);
    }
  }
  for (auto& p : net->parameters()) p.mutable_grad() = torch::Tensor();
  if (optimizer) TimeOptimizerShares(net, optimizer, steps, batch_size, device, out);

  net->eval();
  {
    torch::NoGradGuard no_grad;
    for (int step = 0; step < steps; ++step) {
      torch::Tensor x, y;
      batch(step, &x, &y);
      (void)TimeEachLayer(net, x, device, v1::PHASE_INFER, origin, inference, out);
    }
  }
  if (energy.seconds > 0) RepeatEachLayer(net, images, batch_size, device, energy, out);

  torch::Tensor x, y;
  batch(0, &x, &y);
  torch::NoGradGuard no_grad;
  torch::Tensor h = x;
  size_t i = 0;
  for (auto& layer : *net) {
    v1::LayerTiming& t = out[i];
    t.set_index(static_cast<int32_t>(i));
    t.set_name(ShortName(*layer.ptr()));
    *t.mutable_forward() = Stats(forward[i], batch_size);
    *t.mutable_backward() = Stats(backward[i], batch_size);
    *t.mutable_inference() = Stats(inference[i], batch_size);
    torch::Tensor next;
    t.set_forward_flops_per_sample(CountFlops([&] { next = layer.forward<torch::Tensor>(h); }) /
                                   static_cast<double>(batch_size));
    if (next.defined() && next.dim() > 0 && next.size(0) > 0) {
      t.set_output_bytes_per_sample(next.numel() * static_cast<int64_t>(next.element_size()) / next.size(0));
    }
    h = next;
    ++i;
  }
  return out;
}

}  // namespace hetbench::agent
