// qnn training throughput, before and after batching the simulator, in one
// run: the same model (Linear(784, n) - quantum layer - Linear(n, 10)), the
// same seed, data order and optimiser, trained for one epoch of
// Fashion-MNIST twice: with one StateVector per sample (the earlier
// simulator, kept as the reference) and with the batched simulator. Prints
// training samples/s, the time in the quantum layer's share, and test
// accuracy for each, and the ratio.
#include <torch/torch.h>

#include <CLI/CLI.hpp>
#include <cstdio>

#include "agent/data/fashion_mnist.h"
#include "agent/qpu/qnn.h"
#include "common/clock.h"

namespace {

namespace qpu = hetbench::agent::qpu;

struct Result {
  double train_s = 0;
  int64_t samples = 0;
  double accuracy = 0;
};

Result TrainOneEpoch(const hetbench::agent::ImageDataset& ds, qpu::QnnShape shape, int64_t batch, double lr,
                     int64_t limit) {
  torch::manual_seed(1);
  torch::nn::Sequential net = qpu::MakeQnn(shape);
  torch::optim::Adam opt(net->parameters(), torch::optim::AdamOptions(lr));
  const int64_t n = std::min(limit, ds.train.size());
  torch::Tensor order = torch::randperm(n, torch::TensorOptions().dtype(torch::kInt64));
  Result r;
  const int64_t t0 = hetbench::SteadyNowNs();
  for (int64_t i = 0; i < n; i += batch) {
    const torch::Tensor idx = order.slice(0, i, std::min(n, i + batch));
    const torch::Tensor x = ds.train.images.index_select(0, idx), y = ds.train.labels.index_select(0, idx);
    opt.zero_grad();
    torch::nn::functional::cross_entropy(net->forward(x), y).backward();
    opt.step();
    r.samples += idx.size(0);
  }
  r.train_s = static_cast<double>(hetbench::SteadyNowNs() - t0) * 1e-9;
  torch::NoGradGuard no_grad;
  const torch::Tensor pred = net->forward(ds.test.images).argmax(1);
  r.accuracy = pred.eq(ds.test.labels).to(torch::kFloat64).mean().item<double>();
  return r;
}

}  // namespace

int main(int argc, char** argv) {
  int qubits = 8, layers = 2, threads = 1;
  int64_t batch = 128, limit = 60000;
  double lr = 1e-3;
  std::string data = HETBENCH_DATA_DIR;
  CLI::App app{"hetbench qnn: training samples/s with one state per sample vs batched states"};
  app.add_option("--qubits", qubits)->capture_default_str();
  app.add_option("--layers", layers)->capture_default_str();
  app.add_option("--threads", threads, "LibTorch intra-op threads")->capture_default_str();
  app.add_option("--batch", batch)->capture_default_str();
  app.add_option("--lr", lr)->capture_default_str();
  app.add_option("--train-samples", limit, "train on the first N samples (one epoch = 60000)")->capture_default_str();
  app.add_option("--data", data, "Fashion-MNIST directory")->capture_default_str();
  CLI11_PARSE(app, argc, argv);
  torch::set_num_threads(threads);
  auto ds = hetbench::agent::LoadFashionMnist(data);
  if (!ds.ok()) {
    std::fprintf(stderr, "bench_qnn: %s\n", std::string(ds.status().message()).c_str());
    return 1;
  }
  std::printf("qnn %d qubits, %d layers (%lld gates per circuit, complex128), batch %lld, Adam lr %g, %d thread(s)\n",
              qubits, layers, static_cast<long long>(qpu::QnnGatesPerCircuit({qubits, layers})),
              static_cast<long long>(batch), lr, threads);
  std::printf("%-28s %10s %12s %14s\n", "simulator", "train_s", "samples/s", "test_accuracy");
  Result before, after;
  for (bool per_sample : {true, false}) {
    const Result r = TrainOneEpoch(*ds, qpu::QnnShape{qubits, layers, per_sample}, batch, lr, limit);
    std::printf("%-28s %10.2f %12.0f %14.4f\n", per_sample ? "one state per sample" : "batched states", r.train_s,
                static_cast<double>(r.samples) / r.train_s, r.accuracy);
    std::fflush(stdout);
    (per_sample ? before : after) = r;
  }
  std::printf("speedup (batched / per-sample samples/s): %.2fx; accuracy difference %.4f\n",
              before.train_s / after.train_s, after.accuracy - before.accuracy);
  return 0;
}
