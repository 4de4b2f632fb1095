#include "agent/validation/allreduce.h"

#include <algorithm>
#include <cmath>
#include <memory>
#include <torch/csrc/distributed/c10d/ProcessGroup.hpp>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "agent/devices/cuda.h"
#include "agent/gang/gang_group.h"
#include "common/clock.h"

namespace hetbench::agent {

namespace {

v1::ValidationTest Ended(v1::TestOutcome outcome, std::string reason) {
  v1::ValidationTest t;
  t.set_outcome(outcome);
  t.set_reason(std::move(reason));
  return t;
}

void AllReduce(c10d::ProcessGroup* group, torch::Tensor& t, c10d::ReduceOp op = c10d::ReduceOp::SUM) {
  std::vector<at::Tensor> tensors{t};
  c10d::AllreduceOptions options;
  options.reduceOp = op;
  group->allreduce(tensors, options)->wait();
}

// The larger of the ranks' values, so both run the same count.
int64_t Agree(c10d::ProcessGroup* group, int64_t value) {
  torch::Tensor t = torch::full({1}, static_cast<double>(value), torch::TensorOptions().dtype(torch::kFloat64));
  AllReduce(group, t, c10d::ReduceOp::MAX);
  return static_cast<int64_t>(t.item<double>());
}

std::string Peer(const v1::GangAssign& gang) {
  const int other = gang.rank() == 0 ? 1 : 0;
  return other < gang.peers_size() ? gang.peers(other) : absl::StrCat("rank ", other);
}

}  // namespace

v1::ValidationTest AllReduceBandwidth(const AllReduceRun& r) {
  const int world = r.gang.world_size();
  if (world < 2) return Ended(v1::TEST_OUTCOME_SKIPPED, "an all-reduce needs two agents: this task has no pair");
  auto joined = GangGroup::Join(r.gang, r.own_host);
  if (!joined.ok()) {
    return Ended(v1::TEST_OUTCOME_FAILED, absl::StrCat("with ", Peer(r.gang), ": ", joined.status().message()));
  }
  c10d::ProcessGroup* group = (*joined)->group();
  const int64_t n = std::max<int64_t>(1, r.bytes / static_cast<int64_t>(sizeof(float)));
  const auto options = torch::TensorOptions().dtype(torch::kFloat32).device(r.device);
  auto sync = [&r] {
    if (r.device.is_cuda()) SyncDevice(r.device);
  };
  try {
    // The sum first: rank k contributes k + 1 in every element, small integers a float holds exactly.
    torch::Tensor check = torch::full({n}, static_cast<float>(r.gang.rank() + 1), options);
    AllReduce(group, check);
    const float expected = static_cast<float>(world * (world + 1) / 2);
    const int64_t wrong = check.ne(expected).sum().item<int64_t>();
    if (wrong > 0) {
      return Ended(v1::TEST_OUTCOME_FAILED,
                   absl::StrFormat("wrong result: %d of %d elements of the all-reduce with %s are not the sum %g",
                                   wrong, n, Peer(r.gang), expected));
    }
    torch::Tensor buffer = torch::zeros({n}, options);  // zeros stay zeros however often they are summed
    AllReduce(group, buffer);                           // untimed
    sync();
    int64_t t0 = SteadyNowNs();
    constexpr int kCalibration = 3;
    for (int i = 0; i < kCalibration; ++i) AllReduce(group, buffer);
    sync();
    const double per_op = static_cast<double>(SteadyNowNs() - t0) * 1e-9 / kCalibration;
    const double rep_s = std::clamp(r.time_box_seconds / (4.0 * r.repetitions), 0.02, 0.25);
    const int64_t per_rep = Agree(group, std::max<int64_t>(1, std::lround(rep_s / std::max(per_op, 1e-9))));
    const double bus_bytes = 2.0 * (world - 1) / world * static_cast<double>(n * sizeof(float));
    v1::ValidationTest t;
    for (int rep = 0; rep < r.repetitions; ++rep) {
      if (Agree(group, r.expired() ? 1 : 0) > 0) {
        return Ended(v1::TEST_OUTCOME_TIMED_OUT, absl::StrCat(t.values_size(), " of ", r.repetitions,
                                                              " repetitions done when a rank's box ran out"));
      }
      t0 = SteadyNowNs();
      for (int64_t i = 0; i < per_rep; ++i) AllReduce(group, buffer);
      sync();
      const double seconds = std::max(static_cast<double>(SteadyNowNs() - t0) * 1e-9, 1e-9);
      t.add_values(bus_bytes * static_cast<double>(per_rep) / seconds * 1e-9);
    }
    t.set_detail(absl::StrFormat(
        "rank %d of %d with %s: %d MiB float32, %d all-reduces per repetition, rendezvous %.2f s; bus bandwidth "
        "= 2(n-1)/n x bytes / time",
        r.gang.rank(), world, Peer(r.gang), n * static_cast<int64_t>(sizeof(float)) >> 20, per_rep,
        (*joined)->rendezvous_seconds()));
    return t;
  } catch (const std::exception& e) {
    std::string what = e.what();
    what = what.substr(0, what.find('\n'));
    return Ended(v1::TEST_OUTCOME_FAILED, absl::StrCat("with ", Peer(r.gang), ": ", what).substr(0, 1000));
  }
}

}  // namespace hetbench::agent
