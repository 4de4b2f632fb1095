#include "agent/models/models.h"

#include <sstream>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/job_spec.h"

namespace hetbench::agent {

namespace {

// mlp: Linear(784,512)-ReLU-Dropout(0.2)-Linear(512,512)-ReLU-Dropout(0.2)-Linear(512,10)
torch::nn::Sequential Mlp() {
  return torch::nn::Sequential(torch::nn::Linear(784, 512), torch::nn::ReLU(), torch::nn::Dropout(0.2),
                               torch::nn::Linear(512, 512), torch::nn::ReLU(), torch::nn::Dropout(0.2),
                               torch::nn::Linear(512, 10));
}

}  // namespace

absl::StatusOr<BuiltModel> BuildModel(const std::string& name, uint64_t seed) {
  torch::manual_seed(seed);
  BuiltModel out;
  if (name == "mlp") {
    out.net = Mlp();
  } else {
    return absl::InvalidArgumentError(absl::StrCat(
        "model \"", name, "\" is not in this agent's zoo; available: ", absl::StrJoin(KnownModels(), ", ")));
  }
  std::ostringstream arch;
  arch << *out.net;
  out.architecture = arch.str();
  uint64_t h = 1469598103934665603ULL;
  for (const torch::Tensor& p : out.net->parameters()) {
    torch::Tensor c = p.detach().contiguous().to(torch::kCPU);
    out.parameter_count += c.numel();
    const auto* bytes = static_cast<const uint8_t*>(c.data_ptr());
    for (int64_t i = 0; i < c.numel() * static_cast<int64_t>(c.element_size()); ++i) {
      h ^= bytes[i];
      h *= 1099511628211ULL;
    }
  }
  out.initial_weights_hash = h;
  return out;
}

}  // namespace hetbench::agent
