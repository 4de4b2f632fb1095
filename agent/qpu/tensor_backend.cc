#include "agent/qpu/tensor_backend.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"

namespace hetbench::agent::qpu {

absl::StatusOr<TensorState> TensorState::Create(int qubits, torch::Device device, bool is_double,
                                                int64_t memory_limit_bytes) {
  if (qubits < 1 || qubits > 40) {
    return absl::InvalidArgumentError(absl::StrCat("qubits = ", qubits, ": must be in [1, 40]"));
  }
  if (auto s = TensorBackendUsable(device); !s.ok()) return s;
  const long double bytes = std::ldexp(1.0L, qubits) * (is_double ? 16 : 8);
  if (bytes > static_cast<long double>(memory_limit_bytes)) {
    return absl::ResourceExhaustedError(absl::StrCat("a state of ", qubits, " qubits needs ",
                                                     static_cast<double>(bytes / (1 << 20)),
                                                     " MiB, over the simulator's memory limit of ",
                                                     memory_limit_bytes >> 20, " MiB; use fewer qubits"));
  }
  const auto options = torch::TensorOptions().device(device).dtype(is_double ? torch::kComplexDouble : torch::kComplexFloat);
  TensorState s(qubits, torch::zeros({int64_t{1} << qubits}, options));
  s.Reset();
  return s;
}

void TensorState::Reset() {
  state_.zero_();
  state_.narrow(0, 0, 1).fill_(1);
}

torch::Tensor TensorState::Matrix(const kernels::Block& b) const {
  std::vector<double> ri;  // interleaved (re, im), viewed as complex
  ri.reserve(2 * b.matrix.size());
  for (const auto& e : b.matrix) ri.push_back(e.real()), ri.push_back(e.imag());
  torch::Tensor m = torch::from_blob(ri.data(), {static_cast<int64_t>(b.matrix.size()), 2}, torch::kFloat64).clone();
  return torch::view_as_complex(m).to(state_.options());
}

void TensorState::Apply(const kernels::Block& b) {
  const int k = static_cast<int>(b.qubits.size());
  std::vector<int64_t> twos(static_cast<size_t>(n_), 2);  // tensor dim j is qubit n-1-j
  if (b.diagonal) {
    // The diagonal's [2]*k view lists its qubits most significant first, the
    // same order as the state's dims: put it there, size 1 elsewhere.
    std::vector<int64_t> shape(static_cast<size_t>(n_), 1);
    for (int q : b.qubits) shape[n_ - 1 - q] = 2;
    state_.view(twos).mul_(Matrix(b).view(shape));
    return;
  }
  // Bring the block's qubits last, most significant first, so the last k
  // dims flatten to the block's own index; the rest keep their order.
  std::vector<int64_t> perm;
  for (int j = 0; j < n_; ++j) {
    const int q = n_ - 1 - j;
    if (std::find(b.qubits.begin(), b.qubits.end(), q) == b.qubits.end()) perm.push_back(j);
  }
  for (int t = k - 1; t >= 0; --t) perm.push_back(n_ - 1 - b.qubits[t]);
  std::vector<int64_t> inverse(perm.size());
  for (size_t i = 0; i < perm.size(); ++i) inverse[perm[i]] = static_cast<int64_t>(i);
  const int64_t dim = int64_t{1} << k;
  const torch::Tensor rows = state_.view(twos).permute(perm).reshape({-1, dim});
  const torch::Tensor out = torch::matmul(rows, Matrix(b).view({dim, dim}).transpose(0, 1));
  state_ = out.view(twos).permute(inverse).contiguous().view({-1});
}

double TensorState::ExpectationZ(int q) const {
  const torch::Tensor p = torch::abs(state_).pow(2).view({int64_t{1} << (n_ - 1 - q), 2, int64_t{1} << q});
  return (p.select(1, 0).sum() - p.select(1, 1).sum()).item<double>();
}

absl::Status TensorBackendUsable(const torch::Device& device) {
  if (device.is_cpu()) return absl::OkStatus();
  if (device.is_cuda()) {
    if (!torch::cuda::is_available()) {
      return absl::FailedPreconditionError(
          "the tensor backend on a GPU needs a CUDA LibTorch build and a visible CUDA device; this LibTorch has none");
    }
    if (device.has_index() && device.index() >= static_cast<int>(torch::cuda::device_count())) {
      return absl::FailedPreconditionError(absl::StrCat("cuda:", device.index(), " is not visible (",
                                                        torch::cuda::device_count(), " CUDA devices)"));
    }
    return absl::OkStatus();
  }
  return absl::FailedPreconditionError(absl::StrCat("the tensor backend does not run on ", device.str()));
}

}  // namespace hetbench::agent::qpu
