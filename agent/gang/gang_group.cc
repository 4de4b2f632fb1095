#include "agent/gang/gang_group.h"

#include <chrono>
#include <torch/csrc/distributed/c10d/PrefixStore.hpp>
#include <torch/csrc/distributed/c10d/ProcessGroupGloo.hpp>
#include <torch/csrc/distributed/c10d/TCPStore.hpp>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/clock.h"
#include "common/log.h"

namespace hetbench::agent {

namespace {
constexpr char kLog[] = "gang";
}  // namespace

struct GangGroup::Impl {
  c10::intrusive_ptr<c10d::Store> store;
  c10::intrusive_ptr<c10d::ProcessGroup> group;
};

absl::StatusOr<std::unique_ptr<GangGroup>> GangGroup::Join(const v1::GangAssign& gang, const std::string& own_host) {
  if (gang.world_size() < 1 || gang.rank() < 0 || gang.rank() >= gang.world_size()) {
    return absl::InvalidArgumentError(
        absl::StrCat("gang: rank ", gang.rank(), " of ", gang.world_size(), " is not a rank of the gang"));
  }
  std::unique_ptr<GangGroup> g(new GangGroup(gang.rank(), gang.world_size()));
  if (gang.world_size() == 1) return g;
  if (gang.master_port() <= 0) {
    return absl::FailedPreconditionError(
        absl::StrCat("gang ", gang.gang_id(), ": rank 0's agent advertised no rendezvous port (--rendezvous-port-base)"));
  }
  const std::string& label = gang.round().empty() ? gang.gang_id() : gang.round();  // "job-000001-g0/2"
  const auto timeout = std::chrono::milliseconds(static_cast<int64_t>(gang.timeout_seconds() * 1000));
  const int64_t start_ns = SteadyNowNs();
  try {
    c10d::TCPStoreOptions options;
    options.port = static_cast<uint16_t>(gang.master_port());
    options.isServer = gang.rank() == 0;
    options.numWorkers = gang.world_size();
    options.waitWorkers = false;
    options.timeout = timeout;
    g->impl_ = std::make_unique<Impl>();
    g->impl_->store = c10::make_intrusive<c10d::TCPStore>(gang.master_host(), options);
    // The store listens on one port every round: a rank of an earlier round
    // that reaches it must not take a place in this one.
    if (!gang.round().empty()) {
      g->impl_->store = c10::make_intrusive<c10d::PrefixStore>(absl::StrCat(gang.round(), "/"), g->impl_->store);
    }
    auto gloo = c10d::ProcessGroupGloo::Options::create();
    gloo->devices.push_back(c10d::ProcessGroupGloo::createDeviceForHostname(own_host));
    gloo->timeout = timeout;
    g->impl_->group = c10::make_intrusive<c10d::ProcessGroupGloo>(g->impl_->store, gang.rank(), gang.world_size(), gloo);
  } catch (const std::exception& e) {
    // Rank 0 binds the store's port: when something else holds it, say which flag moves it.
    const bool in_use = gang.rank() == 0 && absl::StrContains(e.what(), "Address already in use");
    return absl::UnavailableError(absl::StrCat(
        "gang ", label, " rank ", gang.rank(), ": rendezvous at ", gang.master_host(), ":", gang.master_port(),
        " failed: ", e.what(),
        in_use ? absl::StrCat(" (another socket holds port ", gang.master_port(),
                              " on this node: give its agent a --rendezvous-port-base whose ports are free and below "
                              "the kernel's ephemeral range, /proc/sys/net/ipv4/ip_local_port_range)")
               : ""));
  }
  g->rendezvous_seconds_ = static_cast<double>(SteadyNowNs() - start_ns) * 1e-9;
  LogInfo(kLog, label, " rank ", gang.rank(), "/", gang.world_size(), " joined via ", gang.master_host(), ":",
          gang.master_port(), " in ", g->rendezvous_seconds_, " s");
  return g;
}

GangGroup::GangGroup(int rank, int world) : rank_(rank), world_(world) {}
GangGroup::~GangGroup() = default;

c10d::ProcessGroup* GangGroup::group() const { return impl_ ? impl_->group.get() : nullptr; }

void GangGroup::InTurn(const std::function<void()>& fn) {
  c10d::ProcessGroup* g = group();
  if (g == nullptr || world_ <= 1) {
    fn();
    return;
  }
  for (int r = 0; r < world_; ++r) {
    g->barrier()->wait();
    if (r == rank_) fn();
  }
  g->barrier()->wait();
}

}  // namespace hetbench::agent
