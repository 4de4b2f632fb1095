#include "agent/serving/serving_model.h"

#include <vector>

#include "common/clock.h"

namespace hetbench::agent {

namespace {

torch::Tensor Rows(const torch::Tensor& images, const std::vector<int64_t>& indices) {
  const int64_t n = images.size(0);
  std::vector<int64_t> rows;
  rows.reserve(indices.size());
  for (int64_t i : indices) rows.push_back(((i % n) + n) % n);
  return images.index_select(0, torch::tensor(rows, torch::kInt64));
}

}  // namespace

BatchingServer::Compute WorkloadCompute(Workload* workload, const torch::Device& device) {
  return [workload, device](const std::vector<int64_t>& indices, int /*instance*/) {
    torch::NoGradGuard no_grad;
    const torch::Tensor x = Rows(workload->Data().test.images, indices).to(device);
    torch::Tensor out = workload->Infer(x);
    if (device.is_cuda()) out = out.to(torch::kCPU);  // waits for the kernels: the answer exists
  };
}

BatchingServer::Compute NullCompute() {
  return [](const std::vector<int64_t>&, int) {};
}

BatchingServer::Compute FixedServiceCompute(absl::Duration per_batch) {
  const int64_t ns = absl::ToInt64Nanoseconds(per_batch);
  return [ns](const std::vector<int64_t>&, int) {
    const int64_t until = SteadyNowNs() + ns;
    while (SteadyNowNs() < until) {
    }
  };
}

absl::Status PrepareForServing(Workload* workload, const torch::Device& device, int batch, int warmup_batches) {
  if (absl::Status s = workload->To(device); !s.ok()) return s;
  workload->SetTraining(false);
  const BatchingServer::Compute compute = WorkloadCompute(workload, device);
  std::vector<int64_t> indices(static_cast<size_t>(std::max(1, batch)));
  for (int b = 0; b < warmup_batches; ++b) {
    for (size_t i = 0; i < indices.size(); ++i) indices[i] = static_cast<int64_t>(b * indices.size() + i);
    compute(indices, 0);
  }
  return absl::OkStatus();
}

}  // namespace hetbench::agent
