// What hetbench's measurement costs, measured in one run:
//  1. per model: hetbench's measured training loop (TorchExecutor, every step
//     timed and recorded) against a bare LibTorch loop of the same model, data,
//     seed and threads, and against the same loop in PyTorch (python3-torch,
//     the same LibTorch) - per-step medians and wall time per step;
//  2. the harness cost per iteration on a null model (a step that does
//     nothing): hetbench's loop minus a bare loop that only fetches the batch.
// Ratios are printed; nothing is asserted.
#include <torch/torch.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_split.h"
#include "agent/data/fashion_mnist.h"
#include "agent/devices/cpu_discovery.h"
#include "agent/executors/torch_executor.h"
#include "agent/models/models.h"
#include "agent/models/workload.h"
#include "common/job_spec.h"

namespace {

using hetbench::SteadyNowNs;
namespace agent = hetbench::agent;
namespace v1 = hetbench::v1;

struct LoopTimes {
  double p50_ns = 0;
  double wall_ns_per_step = 0;
};

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}

// The bare loop: what a user would write by hand. `step` = false fetches the
// batch and does nothing else (the null model's floor).
LoopTimes BareLoop(const agent::ImageDataset& ds, const std::string& model, int64_t warmup, int64_t steps, int64_t bs,
                   bool step) {
  // The null floor (step = false) builds nothing: its loop only fetches batches.
  auto built = step ? agent::BuildModel(model, 42) : absl::StatusOr<agent::BuiltModel>(agent::BuiltModel{});
  torch::nn::Sequential net = built->net;
  std::unique_ptr<torch::optim::Adam> opt;
  if (step) {
    opt = std::make_unique<torch::optim::Adam>(net->parameters(), torch::optim::AdamOptions(1e-3));
    net->train();
  }
  torch::Tensor perm = torch::randperm(ds.train.size(), torch::TensorOptions().dtype(torch::kInt64));
  std::vector<double> times;
  int64_t wall_start = 0;
  for (int64_t i = 0, pos = 0; i < warmup + steps; ++i, pos += bs) {
    if (i == warmup) wall_start = SteadyNowNs();
    if (pos + bs > ds.train.size()) pos = 0;
    torch::Tensor idx = perm.slice(0, pos, pos + bs);
    torch::Tensor x = ds.train.images.index_select(0, idx), y = ds.train.labels.index_select(0, idx);
    const int64_t t0 = SteadyNowNs();
    if (step) {
      opt->zero_grad();
      torch::Tensor out = net->forward(x);
      torch::Tensor loss = built->reconstruction ? torch::mse_loss(out, agent::PixelsFromNormalized(x))
                                                 : torch::nn::functional::cross_entropy(out, y);
      loss.backward();
      opt->step();
    }
    const int64_t t1 = SteadyNowNs();
    if (i >= warmup) times.push_back(static_cast<double>(t1 - t0));
  }
  return {Median(times), static_cast<double>(SteadyNowNs() - wall_start) / static_cast<double>(steps)};
}

// A model whose step does nothing: what remains is the harness.
class NullWorkload final : public agent::Workload {
 public:
  explicit NullWorkload(const agent::ImageDataset& ds) : ds_(ds) {}
  const agent::ImageDataset& Data() const override { return ds_; }
  std::string Architecture() const override { return "null"; }
  std::vector<torch::Tensor> Parameters() const override { return {}; }
  uint64_t InitialHash() const override { return 0; }
  void SetTraining(bool) override {}
  torch::Tensor TrainStep(const torch::Tensor&, const torch::Tensor&) override { return {}; }
  torch::Tensor Infer(const torch::Tensor& x) override { return x; }
  void Score(const torch::Tensor&, const torch::Tensor&, const torch::Tensor&, agent::QualityTotals*) override {}

 private:
  const agent::ImageDataset& ds_;
};

LoopTimes HetbenchLoop(agent::TorchExecutor& exec, const v1::Device& cpu, const std::string& model, int64_t warmup,
                       int64_t steps, int64_t bs) {
  v1::Assign a;
  a.set_task_id("bench");
  a.set_attempt(1);
  a.set_batch_size(static_cast<int32_t>(bs));
  a.set_model(model);
  v1::JobSpec spec;
  spec.set_seed(42);
  spec.mutable_train()->set_warmup_steps(static_cast<int32_t>(warmup));
  spec.mutable_train()->set_min_steps(steps);
  spec.mutable_train()->set_max_steps(steps);
  spec.mutable_train()->set_min_duration_seconds(0);
  spec.mutable_inference()->set_max_batches(1);
  *a.mutable_spec() = hetbench::WithDefaults(spec);
  agent::TaskControl control(agent::SampleCapacity(a), SteadyNowNs());
  auto r = exec.Run(a, cpu, &control);
  if (!r.ok()) {
    std::fprintf(stderr, "executor: %s\n", r.status().ToString().c_str());
    return {};
  }
  std::vector<double> times;
  int64_t first = -1, last_end = 0;
  for (size_t i = 0; i < control.samples.published(); ++i) {
    const auto& rec = control.samples.at(i);
    if (rec.phase != v1::PHASE_TRAIN) continue;
    times.push_back(static_cast<double>(rec.duration_ns));
    if (first < 0) first = rec.start_ns;
    last_end = rec.start_ns + rec.duration_ns;
  }
  // First step's start to last step's end spans `steps` steps and the loop around them.
  return {Median(times), times.empty() ? 0 : static_cast<double>(last_end - first) / static_cast<double>(times.size())};
}

// The PyTorch script's figures, or {} when python3-torch is missing.
LoopTimes PythonLoop(const std::string& script, const std::string& model, int64_t warmup, int64_t steps, int64_t bs,
                     int threads, std::string* blas) {
  const std::string cmd = "/usr/bin/python3 " + script + " --model " + model + " --warmup " + std::to_string(warmup) +
                          " --steps " + std::to_string(steps) + " --batch " + std::to_string(bs) + " --threads " +
                          std::to_string(threads);
  FILE* p = popen(cmd.c_str(), "r");
  if (!p) return {};
  char buf[1024] = {0};
  std::string line = fgets(buf, sizeof(buf), p) ? buf : "";
  pclose(p);
  LoopTimes t;
  double p50 = 0, wall = 0;
  const auto p50_at = line.find("\"p50_ns\": "), wall_at = line.find("\"wall_ns_per_step\": ");
  const auto core_at = line.find("\"blas_core\": \"");
  if (p50_at == std::string::npos || wall_at == std::string::npos) return {};
  std::sscanf(line.c_str() + p50_at + 10, "%lf", &p50);
  std::sscanf(line.c_str() + wall_at + 20, "%lf", &wall);
  if (core_at != std::string::npos) *blas = line.substr(core_at + 14, line.find('"', core_at + 14) - core_at - 14);
  t.p50_ns = p50;
  t.wall_ns_per_step = wall;
  return t;
}

}  // namespace

int main(int argc, char** argv) {
  int64_t steps = 100, bs = 128, null_steps = 20000;
  int repeats = 1;
  std::string models = "mlp,cnn,rnn,lstm,autoencoder";
  std::string script = std::string(HETBENCH_SOURCE_DIR) + "/bench/pytorch_reference.py";
  bool python = true;
  CLI::App app{"hetbench measurement overhead: hetbench vs bare LibTorch vs PyTorch, and the null-model harness cost"};
  app.add_option("--models", models, "comma-separated layer-stack models")->capture_default_str();
  app.add_option("--steps", steps, "measured steps per loop")->capture_default_str();
  app.add_option("--batch", bs, "batch size")->capture_default_str();
  app.add_option("--repeats", repeats, "runs of each pair, alternating the order")->capture_default_str();
  app.add_option("--null-steps", null_steps, "iterations of the null-model loops")->capture_default_str();
  app.add_option("--python-script", script, "the PyTorch reference loop")->capture_default_str();
  app.add_flag("!--no-python", python, "skip the PyTorch comparison");
  CLI11_PARSE(app, argc, argv);

  auto cpu = agent::DiscoverCpu("/proc", agent::AffinityCores());
  auto ds = agent::LoadFashionMnist(HETBENCH_DATA_DIR);
  if (!cpu.ok() || !ds.ok()) {
    std::fprintf(stderr, "setup failed: %s\n", (cpu.ok() ? ds.status() : cpu.status()).ToString().c_str());
    return 1;
  }
  const int threads = std::max(cpu->cores(), 1);
  torch::set_num_threads(threads);
  agent::TorchExecutorConfig config;
  config.data_dir = HETBENCH_DATA_DIR;
  config.calibrate = false;
  config.threads = threads;
  agent::TorchExecutor exec(config);
  const int64_t warmup = 3;
  std::printf("training step, batch %ld, %ld measured steps, %d threads, BLAS %s\n", static_cast<long>(bs),
              static_cast<long>(steps), threads, agent::DescribeBlas().c_str());
  std::printf("%-12s %-3s %10s %10s %10s %10s %10s %10s %11s %11s\n", "model", "rep", "bare_p50", "het_p50", "py_p50",
              "bare_wall", "het_wall", "py_wall", "het/bare", "het/pytorch");
  for (const std::string& model : std::vector<std::string>(absl::StrSplit(models, ','))) {
    std::vector<double> vs_bare, vs_python;
    for (int r = 0; r < repeats; ++r) {
      LoopTimes bare, het, py;
      std::string py_blas = "-";
      if (r % 2 == 0) {  // alternate the order so drift does not favour one side
        bare = BareLoop(*ds, model, warmup, steps, bs, true);
        het = HetbenchLoop(exec, *cpu, model, warmup, steps, bs);
      } else {
        het = HetbenchLoop(exec, *cpu, model, warmup, steps, bs);
        bare = BareLoop(*ds, model, warmup, steps, bs, true);
      }
      if (python) py = PythonLoop(script, model, warmup, steps, bs, threads, &py_blas);
      auto ms = [](double ns) { return ns / 1e6; };
      if (het.wall_ns_per_step > 0) vs_bare.push_back(bare.wall_ns_per_step / het.wall_ns_per_step);
      if (het.wall_ns_per_step > 0 && py.wall_ns_per_step > 0) {
        vs_python.push_back(py.wall_ns_per_step / het.wall_ns_per_step);
      }
      std::printf("%-12s %-3d %10.3f %10.3f %10.3f %10.3f %10.3f %10.3f %11.3f %11s\n", model.c_str(), r,
                  ms(bare.p50_ns), ms(het.p50_ns), ms(py.p50_ns), ms(bare.wall_ns_per_step), ms(het.wall_ns_per_step),
                  ms(py.wall_ns_per_step), het.wall_ns_per_step > 0 ? bare.wall_ns_per_step / het.wall_ns_per_step : 0,
                  py.wall_ns_per_step > 0 && het.wall_ns_per_step > 0
                      ? (std::to_string(py.wall_ns_per_step / het.wall_ns_per_step).substr(0, 5) + " (" + py_blas + ")")
                            .c_str()
                      : "-");
    }
    std::printf("%-12s med %65s %11.3f %11.3f\n", model.c_str(), "", Median(vs_bare), Median(vs_python));
  }
  std::printf("times in ms per step; *_wall = wall time per step of the whole loop (batch fetch, step, timing).\n"
              "het/bare = bare_wall / het_wall: hetbench's throughput relative to the bare loop (goal >= 0.99).\n"
              "het/pytorch = py_wall / het_wall: > 1 when hetbench's C++ loop is faster than the Python script.\n\n");

  // The null model: the harness alone.
  agent::TorchExecutorConfig null_config = config;
  null_config.make_workload = [](const std::string&, const v1::JobSpec&, const agent::ImageDataset& d)
      -> absl::StatusOr<std::unique_ptr<agent::Workload>> { return std::make_unique<NullWorkload>(d); };
  agent::TorchExecutor null_exec(null_config);
  std::vector<double> costs;
  for (int r = 0; r < 3; ++r) {
    const LoopTimes floor = BareLoop(*ds, "mlp", 100, null_steps, 1, false);
    const LoopTimes harness = HetbenchLoop(null_exec, *cpu, "null", 100, null_steps, 1);
    costs.push_back(harness.wall_ns_per_step - floor.wall_ns_per_step);
    std::printf("null model, batch 1, %ld iterations: bare loop %.3f us/iter, hetbench loop %.3f us/iter, "
                "harness cost %.3f us/iter\n",
                static_cast<long>(null_steps), floor.wall_ns_per_step / 1e3, harness.wall_ns_per_step / 1e3,
                costs.back() / 1e3);
  }
  std::printf("harness cost per iteration (median of 3): %.3f us (goal <= 2 us)\n", Median(costs) / 1e3);
  return 0;
}
