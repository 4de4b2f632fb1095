// hetbench's measured training loop (TorchExecutor, recording every step into
// its sample buffer) against a bare LibTorch loop doing the same steps on the
// same data, model, seed and threads. Prints per-step medians and the ratio.
#include <torch/torch.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "agent/data/fashion_mnist.h"
#include "agent/devices/cpu_discovery.h"
#include "agent/executors/torch_executor.h"
#include "agent/models/models.h"

namespace {

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}

// The bare loop: what a user would write by hand.
double BareLoopMedianNs(const hetbench::agent::ImageDataset& ds, int64_t steps, int64_t bs, uint64_t seed) {
  auto built = hetbench::agent::BuildModel("mlp", seed);
  torch::nn::Sequential net = built->net;
  torch::optim::Adam opt(net->parameters(), torch::optim::AdamOptions(1e-3));
  net->train();
  torch::Tensor perm = torch::randperm(ds.train.size(), torch::TensorOptions().dtype(torch::kInt64));
  std::vector<double> times;
  for (int64_t i = 0, pos = 0; i < steps + 3; ++i, pos += bs) {
    if (pos + bs > ds.train.size()) pos = 0;
    torch::Tensor idx = perm.slice(0, pos, pos + bs);
    torch::Tensor x = ds.train.images.index_select(0, idx), y = ds.train.labels.index_select(0, idx);
    auto t0 = std::chrono::steady_clock::now();
    opt.zero_grad();
    torch::Tensor loss = torch::nn::functional::cross_entropy(net->forward(x), y);
    loss.backward();
    opt.step();
    auto t1 = std::chrono::steady_clock::now();
    if (i >= 3) times.push_back(std::chrono::duration<double, std::nano>(t1 - t0).count());
  }
  return Median(times);
}

double HetbenchMedianNs(hetbench::agent::TorchExecutor& exec, const hetbench::v1::Device& cpu, int64_t steps,
                        int64_t bs, uint64_t seed) {
  hetbench::v1::Assign a;
  a.set_task_id("bench");
  a.set_attempt(1);
  a.set_batch_size(static_cast<int32_t>(bs));
  auto* spec = a.mutable_spec();
  spec->set_model("mlp");
  spec->set_seed(seed);
  spec->mutable_train()->set_warmup_steps(3);
  spec->mutable_train()->set_min_steps(steps);
  spec->mutable_train()->set_max_steps(steps);
  spec->mutable_train()->set_min_duration_seconds(0);
  spec->mutable_train()->set_epochs(1);
  spec->mutable_train()->set_learning_rate(1e-3);
  spec->mutable_inference()->set_max_batches(1);
  hetbench::agent::TaskControl control(hetbench::agent::SampleCapacity(a), hetbench::SteadyNowNs());
  auto r = exec.Run(a, cpu, &control);
  if (!r.ok()) {
    std::fprintf(stderr, "executor: %s\n", r.status().ToString().c_str());
    return 0;
  }
  std::vector<double> times;
  for (size_t i = 0; i < control.samples.published(); ++i) {
    const auto& rec = control.samples.at(i);
    if (rec.phase == hetbench::v1::PHASE_TRAIN) times.push_back(static_cast<double>(rec.duration_ns));
  }
  return Median(times);
}

}  // namespace

int main(int argc, char** argv) {
  int64_t steps = 200, bs = 128;
  int repeats = 3;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (!std::strcmp(argv[i], "--steps")) steps = std::atoll(argv[i + 1]);
    if (!std::strcmp(argv[i], "--batch")) bs = std::atoll(argv[i + 1]);
    if (!std::strcmp(argv[i], "--repeats")) repeats = std::atoi(argv[i + 1]);
  }
  auto cpu = hetbench::agent::DiscoverCpu("/proc", hetbench::agent::AffinityCores());
  auto ds = hetbench::agent::LoadFashionMnist(HETBENCH_DATA_DIR);
  if (!cpu.ok() || !ds.ok()) {
    std::fprintf(stderr, "setup failed\n");
    return 1;
  }
  torch::set_num_threads(cpu->cores());
  hetbench::agent::TorchExecutorConfig config;
  config.data_dir = HETBENCH_DATA_DIR;
  hetbench::agent::TorchExecutor exec(config);
  std::printf("mlp training step, batch %ld, %ld steps, %d threads, BLAS %s\n", static_cast<long>(bs),
              static_cast<long>(steps), cpu->cores(), hetbench::agent::DescribeBlas().c_str());
  std::printf("%-8s %14s %14s %8s\n", "repeat", "bare_p50_ms", "hetbench_p50_ms", "ratio");
  for (int r = 0; r < repeats; ++r) {
    // Alternate the order so drift (thermal, other load) does not favour one side.
    double bare, het;
    if (r % 2 == 0) {
      bare = BareLoopMedianNs(*ds, steps, bs, 42);
      het = HetbenchMedianNs(exec, *cpu, steps, bs, 42);
    } else {
      het = HetbenchMedianNs(exec, *cpu, steps, bs, 42);
      bare = BareLoopMedianNs(*ds, steps, bs, 42);
    }
    std::printf("%-8d %14.3f %14.3f %8.3f\n", r, bare / 1e6, het / 1e6, bare > 0 ? het / bare : 0.0);
  }
  std::printf("ratio = hetbench / bare (1.000 = no measurement overhead)\n");
  return 0;
}
