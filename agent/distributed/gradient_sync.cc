#include "agent/distributed/gradient_sync.h"

#include <torch/csrc/distributed/c10d/ProcessGroupGloo.hpp>
#include <torch/csrc/distributed/c10d/TCPStore.hpp>

#include <chrono>

#include "absl/strings/str_cat.h"
#include "common/clock.h"
#include "common/log.h"

namespace hetbench::agent {

namespace {
constexpr char kLog[] = "gang";
}  // namespace

struct GradientSync::Group {
  c10::intrusive_ptr<c10d::Store> store;
  c10::intrusive_ptr<c10d::ProcessGroup> group;
};

absl::StatusOr<std::unique_ptr<GradientSync>> GradientSync::Join(const v1::GangAssign& gang,
                                                                  const std::string& own_host) {
  if (gang.world_size() < 1 || gang.rank() < 0 || gang.rank() >= gang.world_size()) {
    return absl::InvalidArgumentError(
        absl::StrCat("gang: rank ", gang.rank(), " of ", gang.world_size(), " is not a rank of the gang"));
  }
  std::unique_ptr<GradientSync> sync(new GradientSync(gang.rank(), gang.world_size()));
  if (gang.world_size() == 1) return sync;
  if (gang.master_port() <= 0) {
    return absl::FailedPreconditionError(
        absl::StrCat("gang ", gang.gang_id(), ": rank 0's agent advertised no rendezvous port (--rendezvous-port-base)"));
  }
  const auto timeout = std::chrono::milliseconds(static_cast<int64_t>(gang.timeout_seconds() * 1000));
  const int64_t start_ns = SteadyNowNs();
  try {
    c10d::TCPStoreOptions options;
    options.port = static_cast<uint16_t>(gang.master_port());
    options.isServer = gang.rank() == 0;
    options.numWorkers = gang.world_size();
    options.waitWorkers = false;
    options.timeout = timeout;
    sync->group_ = std::make_unique<Group>();
    sync->group_->store = c10::make_intrusive<c10d::TCPStore>(gang.master_host(), options);
    auto gloo = c10d::ProcessGroupGloo::Options::create();
    gloo->devices.push_back(c10d::ProcessGroupGloo::createDeviceForHostname(own_host));
    gloo->timeout = timeout;
    sync->group_->group =
        c10::make_intrusive<c10d::ProcessGroupGloo>(sync->group_->store, gang.rank(), gang.world_size(), gloo);
  } catch (const std::exception& e) {
    return absl::UnavailableError(absl::StrCat("gang ", gang.gang_id(), " rank ", gang.rank(), ": rendezvous at ",
                                               gang.master_host(), ":", gang.master_port(), " failed: ", e.what()));
  }
  sync->rendezvous_seconds_ = static_cast<double>(SteadyNowNs() - start_ns) * 1e-9;
  LogInfo(kLog, gang.gang_id(), " rank ", gang.rank(), "/", gang.world_size(), " joined via ", gang.master_host(), ":",
          gang.master_port(), " in ", sync->rendezvous_seconds_, " s");
  return sync;
}

GradientSync::GradientSync(int rank, int world) : rank_(rank), world_(world) {}
GradientSync::~GradientSync() = default;

double GradientSync::AllReduce(const std::vector<torch::Tensor>& params, double vote) {
  int64_t numel = 1;  // the vote
  for (const torch::Tensor& p : params) numel += p.numel();
  if (!buffer_.defined() || buffer_.numel() != numel) {
    buffer_ = torch::empty({numel}, torch::TensorOptions().dtype(torch::kFloat32));
    bytes_per_step_ = numel * static_cast<int64_t>(sizeof(float));
  }
  const int64_t start_ns = SteadyNowNs();
  {
    torch::NoGradGuard no_grad;
    int64_t at = 0;
    for (const torch::Tensor& p : params) {
      auto slice = buffer_.narrow(0, at, p.numel());
      if (p.grad().defined()) {
        slice.copy_(p.grad().reshape({-1}));
      } else {
        slice.zero_();
      }
      at += p.numel();
    }
    buffer_[at] = static_cast<float>(vote);
    if (world_ > 1) {
      std::vector<at::Tensor> tensors{buffer_};
      group_->group->allreduce(tensors)->wait();
      buffer_.narrow(0, 0, at).div_(static_cast<double>(world_));
    }
    at = 0;
    for (const torch::Tensor& p : params) {
      if (p.grad().defined()) p.mutable_grad().copy_(buffer_.narrow(0, at, p.numel()).view_as(p));
      at += p.numel();
    }
  }
  last_ns_ = SteadyNowNs() - start_ns;
  return buffer_[buffer_.numel() - 1].item<double>();
}

}  // namespace hetbench::agent
