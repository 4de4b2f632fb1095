// Does reading the machine probe between a run's steps (ProbeDuringRun,
// agent/executors/machine_probe.h) change the steps it sits between? Runs
// one task (mlp, batch 64, the job's default length) through the agent's
// real executor, alternately without the readings (A) and with them every
// --every-ms (B), A B then B A on the next pair, and prints:
//  - per pair, B's median time per sample over A's, train and infer, and
//    the median of those ratios (a disturbance shows as > 1);
//  - within B's runs, the median of the 3 steps right after each reading
//    over the median of the run's other steps (a cold cache after the
//    probe's SGEMM shows there first);
//  - the readings themselves: how many a run, their spread within a run
//    whose readings stayed within +/-5% of its median reading (the reading's
//    own noise), the runs in which they did not (the machine flipped), and
//    their median over the mean of the readings before and after the run.
// Prints ratios measured in one run; asserts nothing.
#include <CLI/CLI.hpp>
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include "agent/devices/cpu_discovery.h"
#include "agent/executors/torch_executor.h"
#include "bench/machine.h"
#include "common/clock.h"
#include "common/job_spec.h"
#include "common/stats.h"

namespace hetbench {
namespace {

double Median(std::vector<double> v) { return MedianInPlace(v); }  // common/stats.h

struct Run {
  std::vector<double> steps[2];  // train, infer: ns per sample
  v1::MachineProbe probe;
};

Run RunOnce(agent::TorchExecutor& exec, const v1::Device& cpu, int64_t bs) {
  v1::Assign a;
  a.set_task_id("bench");
  a.set_attempt(1);
  a.set_batch_size(static_cast<int32_t>(bs));
  a.set_model("mlp");
  v1::JobSpec spec;
  spec.set_seed(42);
  *a.mutable_spec() = WithDefaults(spec);
  agent::TaskControl control(agent::SampleCapacity(a), SteadyNowNs());
  auto r = exec.Run(a, cpu, &control);
  Run out;
  if (!r.ok()) {
    std::fprintf(stderr, "executor: %s\n", r.status().ToString().c_str());
    return out;
  }
  for (size_t i = 0; i < control.samples.published(); ++i) {
    const auto& rec = control.samples.at(i);
    if (rec.items <= 0 || (rec.phase != v1::PHASE_TRAIN && rec.phase != v1::PHASE_INFER)) continue;
    out.steps[rec.phase == v1::PHASE_TRAIN ? 0 : 1].push_back(static_cast<double>(rec.duration_ns) / rec.items);
  }
  out.probe = r->machine_probe();
  return out;
}

}  // namespace
}  // namespace hetbench

int main(int argc, char** argv) {
  using namespace hetbench;  // NOLINT
  int pairs = 8, threads = 0, every_ms = 250;
  int64_t bs = 64;
  CLI::App app{"the machine probe read between steps: does it disturb them?"};
  app.add_option("--pairs", pairs, "A B pairs")->capture_default_str()->check(CLI::Range(1, 200));
  app.add_option("--threads", threads, "LibTorch threads (0 = all cores, the job default)")->capture_default_str();
  app.add_option("--every-ms", every_ms, "B's readings, this often")
      ->capture_default_str()
      ->check(CLI::Range(1, 60000));
  app.add_option("--batch", bs, "batch size")->capture_default_str();
  CLI11_PARSE(app, argc, argv);
  auto cpu = agent::DiscoverCpu("/proc", agent::AffinityCores());
  if (!cpu.ok()) {
    std::fprintf(stderr, "setup failed: %s\n", cpu.status().ToString().c_str());
    return 1;
  }
  agent::TorchExecutorConfig config;
  config.data_dir = HETBENCH_DATA_DIR;
  config.calibrate = false;
  config.threads = threads;
  config.machine_probe_every_ms = 0;
  agent::TorchExecutor without(config);
  config.machine_probe_every_ms = every_ms;
  agent::TorchExecutor with(config);
  std::printf(
      "CPU %s; mlp, batch %ld, the job's default run; %d LibTorch thread(s) (0 = all cores); B reads the "
      "probe every %d ms\n",
      bench::CpuModel().c_str(), static_cast<long>(bs), threads, every_ms);
  std::printf("%-4s %9s %9s %10s %10s %8s %9s\n", "pair", "train B/A", "infer B/A", "after/rest", "after/rest",
              "readings", "max/min");
  std::vector<double> ratio[2], after[2], noise, around;
  int flipped = 0, readings = 0;
  for (int p = 0; p < pairs; ++p) {
    Run a, b;
    if (p % 2 == 0) {
      a = RunOnce(without, *cpu, bs);
      b = RunOnce(with, *cpu, bs);
    } else {
      b = RunOnce(with, *cpu, bs);
      a = RunOnce(without, *cpu, bs);
    }
    double pair_ratio[2] = {0, 0}, pair_after[2] = {0, 0};
    for (int ph = 0; ph < 2; ++ph) {
      if (a.steps[ph].empty() || b.steps[ph].empty()) continue;
      pair_ratio[ph] = Median(b.steps[ph]) / Median(a.steps[ph]);
      ratio[ph].push_back(pair_ratio[ph]);
      // B's steps right after a reading of this phase, against its others.
      const v1::Phase phase = ph == 0 ? v1::PHASE_TRAIN : v1::PHASE_INFER;
      std::vector<bool> near(b.steps[ph].size(), false);
      for (const v1::ProbeReading& r : b.probe.during()) {
        if (r.phase() != phase) continue;
        for (int64_t s = r.step(); s < r.step() + 3 && s < static_cast<int64_t>(near.size()); ++s) near[s] = true;
      }
      std::vector<double> near_steps, rest;
      for (size_t s = 0; s < near.size(); ++s) (near[s] ? near_steps : rest).push_back(b.steps[ph][s]);
      if (!near_steps.empty() && !rest.empty()) {
        pair_after[ph] = Median(near_steps) / Median(rest);
        after[ph].push_back(pair_after[ph]);
      }
    }
    std::vector<double> values;
    for (const v1::ProbeReading& r : b.probe.during()) values.push_back(static_cast<double>(r.median_ns()));
    readings += static_cast<int>(values.size());
    if (!values.empty() && b.probe.before_ns() > 0 && b.probe.after_ns() > 0) {  // the two kinds of reading
      around.push_back(Median(values) / (0.5 * static_cast<double>(b.probe.before_ns() + b.probe.after_ns())));
    }
    double spread = 0;
    if (!values.empty()) {
      const double mid = Median(values);
      const auto [lo, hi] = std::minmax_element(values.begin(), values.end());
      spread = *hi / *lo;
      if (*hi > mid * 1.05 || *lo < mid * 0.95) {
        ++flipped;
      } else {
        for (double v : values) noise.push_back(std::fabs(v / mid - 1));
      }
    }
    std::printf("%-4d %9.4f %9.4f %10.4f %10.4f %8zu %9.3f\n", p, pair_ratio[0], pair_ratio[1], pair_after[0],
                pair_after[1], values.size(), spread);
  }
  std::sort(noise.begin(), noise.end());
  const double noise_p95 = noise.empty() ? 0 : noise[std::min(noise.size() - 1, noise.size() * 95 / 100)];
  std::printf(
      "RESULT probe_during pairs=%d threads=%d every_ms=%d train_B_over_A_median=%.4f infer_B_over_A_median=%.4f "
      "train_after_over_rest_median=%.4f infer_after_over_rest_median=%.4f readings=%d runs_flipped=%d of %d "
      "steady_reading_dev_p95=%.4f during_over_around_median=%.4f\n",
      pairs, threads, every_ms, Median(ratio[0]), Median(ratio[1]), Median(after[0]), Median(after[1]), readings,
      flipped, pairs, noise_p95, Median(around));
  return 0;
}
