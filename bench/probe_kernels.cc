// Which probe kernel follows a model's training steps? On some hosts
// mlp's training steps wander by several percent over stretches of a
// second or more while the machine probe's SGEMM holds steady
// (docs/compare-measured.md, "Runs placed by their phase's readings"). This bench trains one model (mlp, batch 64) for
// --seconds without a break and, every --every-ms between steps, reads
// each candidate kernel in turn (the order rotating), as ProbeDuringRun
// reads the probe: one untimed call, two 3 ms windows, the lower median:
//  - sgemm: the agent's probe ([64,512] x [512,512] float32);
//  - l3: a += b over two float32 tensors of --l3-mib MiB together (out of
//    L2, inside L3 on the hosts seen here): memory-bound, as an optimizer's
//    update over mlp's parameters is;
//  - dram: the same over --dram-mib MiB (beyond L3).
// For each stretch of steps between two consecutive readings it takes the
// steps' median, and prints for each kernel how its reading (the mean of
// the two around the stretch, log scale) follows that median: correlation,
// slope, and the readings' own noise (median |log change| from one reading
// to the next). Also every 10 s: the steps' median and each kernel's; and,
// over stretches of --run-s seconds standing for runs, how much of the
// steps' spread between them a kernel's readings would explain (RESULT_RUNS).
// Prints what it measured in one run; asserts nothing.
#include <torch/torch.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "agent/data/fashion_mnist.h"
#include "agent/executors/machine_probe.h"
#include "agent/models/workload.h"
#include "bench/machine.h"
#include "common/clock.h"
#include "common/job_spec.h"
#include "common/stats.h"

namespace hetbench {
namespace {

double Median(std::vector<double> v) { return v.empty() ? 0 : MedianInPlace(v); }

// A stream kernel timed as ProbeDuringRun times the probe: one untimed call, two
// 3 ms windows, the lower of their median calls (ns).
double TimeKernel(const std::function<void()>& call) {
  call();
  double best = 0;
  std::vector<double> calls;
  for (int w = 0; w < 2; ++w) {
    calls.clear();
    const int64_t end = SteadyNowNs() + 3'000'000;
    for (int64_t now = SteadyNowNs(); now < end || calls.size() < 5;) {
      call();
      const int64_t t = SteadyNowNs();
      calls.push_back(static_cast<double>(t - now));
      now = t;
    }
    const double m = MedianInPlace(calls);
    if (best == 0 || m < best) best = m;
  }
  return best;
}

struct Kernel {
  std::string name;
  std::function<double()> read;  // one reading, ns a call
  std::vector<double> readings;  // log ns, one per reading time
};

// a += b over two float32 tensors of `mib` MiB together, read as TimeKernel reads.
std::function<double()> Stream(double mib) {
  const int64_t n = std::max<int64_t>(1024, static_cast<int64_t>(mib * 1024 * 1024 / 8));
  auto a = std::make_shared<torch::Tensor>(torch::ones({n}));
  auto b = std::make_shared<torch::Tensor>(torch::full({n}, 1e-7));
  return [a, b] {
    return TimeKernel([a, b] {
      torch::NoGradGuard no_grad;
      a->add_(*b);
    });
  };
}

struct Fit {
  double corr = 0, slope = 0;
};

Fit Correlate(const std::vector<double>& x, const std::vector<double>& y) {
  const size_t n = std::min(x.size(), y.size());
  if (n < 3) return {};
  double mx = 0, my = 0;
  for (size_t i = 0; i < n; ++i) mx += x[i], my += y[i];
  mx /= static_cast<double>(n);
  my /= static_cast<double>(n);
  double sxx = 0, syy = 0, sxy = 0;
  for (size_t i = 0; i < n; ++i) {
    sxx += (x[i] - mx) * (x[i] - mx);
    syy += (y[i] - my) * (y[i] - my);
    sxy += (x[i] - mx) * (y[i] - my);
  }
  if (!(sxx > 0) || !(syy > 0)) return {};
  return {sxy / std::sqrt(sxx * syy), sxy / sxx};
}

// What one training session recorded: each step's time, and where and when the kernels were read.
struct Trace {
  std::vector<double> steps;        // ns per step
  std::vector<size_t> reading_at;   // the step each reading preceded
  std::vector<int64_t> reading_ns;  // when, since the start
};

// Trains `w` for `seconds`, reading every kernel (its order rotating) every `every_ms` between steps.
Trace Train(agent::Workload& w, const agent::ImageDataset& ds, int64_t bs, double seconds, int every_ms,
            std::vector<Kernel>* kernels) {
  Trace t;
  w.SetTraining(true);
  const torch::Tensor& images = ds.train.images;
  const torch::Tensor& labels = ds.train.labels;
  const int64_t n = images.size(0);
  const int64_t start = SteadyNowNs(), until = start + static_cast<int64_t>(seconds * 1e9);
  int64_t next_reading = start, lo = 0;
  for (int64_t now = start; now < until;) {
    if (now >= next_reading) {
      const size_t first = t.reading_at.size() % kernels->size();
      for (size_t k = 0; k < kernels->size(); ++k) {
        Kernel& kernel = (*kernels)[(first + k) % kernels->size()];
        kernel.readings.push_back(std::log(kernel.read()));
      }
      t.reading_at.push_back(t.steps.size());
      t.reading_ns.push_back(now - start);
      next_reading = SteadyNowNs() + int64_t{every_ms} * 1'000'000;
    }
    if (lo + bs > n) lo = 0;
    const torch::Tensor x = images.slice(0, lo, lo + bs), y = labels.slice(0, lo, lo + bs);
    lo += bs;
    const int64_t t0 = SteadyNowNs();
    (void)w.TrainStep(x, y);
    now = SteadyNowNs();
    t.steps.push_back(static_cast<double>(now - t0));
  }
  return t;
}

// Every 10 s: the steps' median and each kernel's median reading (us).
void PrintTimeline(const Trace& t, const std::vector<Kernel>& kernels, double seconds) {
  std::printf("%6s %10s", "t (s)", "step us");
  for (const Kernel& k : kernels) std::printf(" %9s", (k.name + " us").c_str());
  std::printf("\n");
  for (int64_t from = 0; from < static_cast<int64_t>(seconds * 1e9); from += 10'000'000'000) {
    std::vector<double> s;
    std::vector<std::vector<double>> r(kernels.size());
    for (size_t j = 0; j + 1 < t.reading_at.size(); ++j) {
      if (t.reading_ns[j] < from || t.reading_ns[j] >= from + 10'000'000'000) continue;
      s.insert(s.end(), t.steps.begin() + static_cast<std::ptrdiff_t>(t.reading_at[j]),
               t.steps.begin() + static_cast<std::ptrdiff_t>(t.reading_at[j + 1]));
      for (size_t k = 0; k < kernels.size(); ++k) r[k].push_back(std::exp(kernels[k].readings[j]));
    }
    if (s.empty()) continue;
    std::printf("%6.0f %10.1f", static_cast<double>(from) * 1e-9, Median(s) * 1e-3);
    for (size_t k = 0; k < kernels.size(); ++k) std::printf(" %9.1f", Median(r[k]) * 1e-3);
    std::printf("\n");
  }
}

// How each kernel's readings follow the steps between them, over all
// stretches and within the SGEMM's main state; RESULT lines.
void PrintFits(const Trace& t, const std::vector<Kernel>& kernels, const std::string& model, double seconds) {
  // Each stretch between consecutive readings: its steps' median (log), and
  // each kernel's mean of the two readings around it.
  std::vector<double> stretch;
  std::vector<std::vector<double>> around(kernels.size());
  for (size_t j = 1; j < t.reading_at.size(); ++j) {
    const std::vector<double> s(t.steps.begin() + static_cast<std::ptrdiff_t>(t.reading_at[j - 1]),
                                t.steps.begin() + static_cast<std::ptrdiff_t>(t.reading_at[j]));
    if (s.size() < 5) continue;
    stretch.push_back(std::log(Median(s)));
    for (size_t k = 0; k < kernels.size(); ++k) {
      around[k].push_back(0.5 * (kernels[k].readings[j - 1] + kernels[k].readings[j]));
    }
  }
  std::vector<double> step_moves;
  for (size_t j = 1; j < stretch.size(); ++j) step_moves.push_back(std::fabs(stretch[j] - stretch[j - 1]));
  std::printf("RESULT probe_kernels model=%s threads=%d seconds=%.0f steps=%zu stretches=%zu step_move_median=%.4f\n",
              model.c_str(), torch::get_num_threads(), seconds, t.steps.size(), stretch.size(), Median(step_moves));
  // Within the SGEMM's main state (its reading within 5% of its median):
  // does a kernel follow what the SGEMM does not?
  std::vector<size_t> steady;
  const double sgemm_state = Median(around[0]);
  for (size_t j = 0; j < stretch.size(); ++j) {
    if (std::fabs(around[0][j] - sgemm_state) <= std::log1p(0.05)) steady.push_back(j);
  }
  auto pick = [&](const std::vector<double>& v) {
    std::vector<double> out;
    for (size_t j : steady) out.push_back(v[j]);
    return out;
  };
  std::vector<double> steady_stretch = pick(stretch), steady_moves;
  for (size_t j = 1; j < steady_stretch.size(); ++j) {
    steady_moves.push_back(std::fabs(steady_stretch[j] - steady_stretch[j - 1]));
  }
  std::vector<double> centred = steady_stretch;
  const double steady_median = Median(centred);
  for (double& c : centred) c = std::fabs(c - steady_median);
  std::printf(
      "RESULT_STEADY stretches=%zu of %zu step_move_median=%.4f step_dev_median=%.4f (stretches in the "
      "SGEMM's main state)\n",
      steady.size(), stretch.size(), Median(steady_moves), Median(centred));
  for (size_t k = 0; k < kernels.size(); ++k) {
    const Fit in_state = Correlate(pick(around[k]), steady_stretch);
    std::printf("RESULT_KERNEL_STEADY %s corr=%.3f slope=%.3f\n", kernels[k].name.c_str(), in_state.corr,
                in_state.slope);
  }
  for (size_t k = 0; k < kernels.size(); ++k) {
    std::vector<double> moves;
    for (size_t j = 1; j < kernels[k].readings.size(); ++j) {
      moves.push_back(std::fabs(kernels[k].readings[j] - kernels[k].readings[j - 1]));
    }
    const Fit f = Correlate(around[k], stretch);
    std::printf("RESULT_KERNEL %s median_us=%.2f corr=%.3f slope=%.3f reading_move_median=%.4f\n",
                kernels[k].name.c_str(), std::exp(Median(kernels[k].readings)) * 1e-3, f.corr, f.slope, Median(moves));
  }
}
// Run-length stretches: would a kernel's readings, taken over a run as the
// agent takes them, narrow the spread between runs in one SGEMM state? The
// trace is cut into stretches of `run_s` seconds; each stretch's median step
// and each kernel's median reading (logs); stretches whose SGEMM median lies
// within 3% of the median stretch's are kept. For each kernel: the steps'
// spread (sd of log medians) left after subtracting the kernel's reading
// times a slope fitted on the other stretches only (leave one out: the
// slope is never fitted on the stretch it corrects, as compare would learn
// it from other jobs).
void PrintRuns(const Trace& t, const std::vector<Kernel>& kernels, double run_s) {
  const int64_t run_ns = static_cast<int64_t>(run_s * 1e9);
  std::vector<double> step;
  std::vector<std::vector<double>> reading(kernels.size());
  for (int64_t from = 0;; from += run_ns) {
    std::vector<double> s;
    std::vector<std::vector<double>> r(kernels.size());
    bool past_end = true;
    for (size_t j = 0; j + 1 < t.reading_at.size(); ++j) {
      if (t.reading_ns[j] >= from) past_end = false;
      if (t.reading_ns[j] < from || t.reading_ns[j] >= from + run_ns) continue;
      s.insert(s.end(), t.steps.begin() + static_cast<std::ptrdiff_t>(t.reading_at[j]),
               t.steps.begin() + static_cast<std::ptrdiff_t>(t.reading_at[j + 1]));
      for (size_t k = 0; k < kernels.size(); ++k) r[k].push_back(kernels[k].readings[j]);
    }
    if (past_end) break;
    if (r[0].size() < 3) continue;
    step.push_back(std::log(Median(s)));
    for (size_t k = 0; k < kernels.size(); ++k) reading[k].push_back(Median(r[k]));
  }
  const double state = Median(reading[0]);
  std::vector<size_t> kept;
  for (size_t i = 0; i < step.size(); ++i) {
    if (std::fabs(reading[0][i] - state) <= std::log1p(0.03)) kept.push_back(i);
  }
  auto sd = [](const std::vector<double>& v) {
    if (v.size() < 2) return 0.0;
    double m = 0, q = 0;
    for (double x : v) m += x;
    m /= static_cast<double>(v.size());
    for (double x : v) q += (x - m) * (x - m);
    return std::sqrt(q / static_cast<double>(v.size() - 1));
  };
  std::vector<double> kept_steps;
  for (size_t i : kept) kept_steps.push_back(step[i]);
  std::printf(
      "RESULT_RUNS run_s=%.1f runs=%zu in_state=%zu step_sd=%.4f (log medians of the runs in the SGEMM's state)\n",
      run_s, step.size(), kept.size(), sd(kept_steps));
  for (size_t k = 0; k < kernels.size(); ++k) {
    std::vector<double> x, residual;
    for (size_t i : kept) x.push_back(reading[k][i]);
    for (size_t out = 0; out < kept.size(); ++out) {
      std::vector<double> xs, ys;
      for (size_t i = 0; i < kept.size(); ++i) {
        if (i != out) xs.push_back(x[i]), ys.push_back(kept_steps[i]);
      }
      const Fit f = Correlate(xs, ys);
      double mx = 0;
      for (double v : xs) mx += v;
      mx /= static_cast<double>(std::max<size_t>(xs.size(), 1));
      residual.push_back(kept_steps[out] - f.slope * (x[out] - mx));
    }
    const Fit all = Correlate(x, kept_steps);
    std::printf("RESULT_RUNS_KERNEL %s corr=%.3f slope=%.3f step_sd_after=%.4f (leave one out) ratio=%.3f\n",
                kernels[k].name.c_str(), all.corr, all.slope, sd(residual),
                sd(kept_steps) > 0 ? sd(residual) / sd(kept_steps) : 0.0);
  }
}

}  // namespace
}  // namespace hetbench

int main(int argc, char** argv) {
  using namespace hetbench;  // NOLINT
  int threads = 0, every_ms = 250;
  double seconds = 120, l3_mib = 8, dram_mib = 64, run_s = 1;
  int64_t bs = 64;
  std::string model = "mlp";
  CLI::App app{"which probe kernel follows a model's training steps?"};
  app.add_option("--seconds", seconds, "training time")->capture_default_str()->check(CLI::Range(5.0, 3600.0));
  app.add_option("--threads", threads, "LibTorch threads (0 = all cores, the job default)")->capture_default_str();
  app.add_option("--every-ms", every_ms, "the kernels read this often")
      ->capture_default_str()
      ->check(CLI::Range(50, 60000));
  app.add_option("--model", model, "the model trained")->capture_default_str();
  app.add_option("--batch", bs, "batch size")->capture_default_str();
  app.add_option("--l3-mib", l3_mib, "the l3 kernel's two tensors, MiB together")->capture_default_str();
  app.add_option("--dram-mib", dram_mib, "the dram kernel's two tensors, MiB together")->capture_default_str();
  app.add_option(
         "--run-s", run_s,
         "stretches this long stand for runs in RESULT_RUNS (a job's training: train.min_duration_seconds, 1 s)")
      ->capture_default_str()
      ->check(CLI::Range(0.5, 600.0));
  CLI11_PARSE(app, argc, argv);
  torch::set_num_threads(threads > 0 ? threads : static_cast<int>(std::max(1u, std::thread::hardware_concurrency())));
  auto ds = agent::LoadFashionMnist(HETBENCH_DATA_DIR);
  if (!ds.ok()) {
    std::fprintf(stderr, "setup failed: %s\n", ds.status().ToString().c_str());
    return 1;
  }
  v1::JobSpec spec;
  spec.set_seed(42);
  auto w = agent::MakeWorkload(model, WithDefaults(spec), *ds);
  if (!w.ok()) {
    std::fprintf(stderr, "setup failed: %s\n", w.status().ToString().c_str());
    return 1;
  }
  std::vector<Kernel> kernels;
  // The agent's own probe, read exactly as ProbeDuringRun reads it (agent/executors/machine_probe.h).
  auto probe = std::make_shared<agent::ProbeTimer>();
  kernels.push_back({"sgemm", [probe] { return static_cast<double>(probe->Time(3'000'000, 2, 0, 1).median_ns); }, {}});
  kernels.push_back({"l3", Stream(l3_mib), {}});
  kernels.push_back({"dram", Stream(dram_mib), {}});
  std::printf("CPU %s; %s, batch %ld, %d LibTorch thread(s); kernels read every %d ms; l3 %.0f MiB, dram %.0f MiB\n",
              bench::CpuModel().c_str(), model.c_str(), static_cast<long>(bs), torch::get_num_threads(), every_ms,
              l3_mib, dram_mib);
  const Trace trace = Train(**w, *ds, bs, seconds, every_ms, &kernels);
  PrintTimeline(trace, kernels, seconds);
  PrintFits(trace, kernels, model, seconds);
  PrintRuns(trace, kernels, run_s);
  return 0;
}
