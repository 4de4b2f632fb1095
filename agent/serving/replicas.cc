#include "agent/serving/replicas.h"

#include <torch/torch.h>

#include <torch/csrc/distributed/c10d/ProcessGroup.hpp>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "agent/gang/gang_group.h"
#include "common/clock.h"

namespace hetbench::agent {

int64_t AgreedStartSteadyNs(int64_t latest_proposal_coordinator_ns, int64_t offset_ns) {
  return latest_proposal_coordinator_ns - offset_ns;
}

absl::StatusOr<ReplicaStart> MeetReplicas(const ReplicaMeeting& meeting, absl::Duration lead) {
  ReplicaStart start;
  start.rank = meeting.gang.rank();
  start.replicas = std::max(meeting.gang.world_size(), 1);
  const v1::ClockSync clock = meeting.clock ? meeting.clock() : v1::ClockSync();
  v1::ReplicaRun& r = start.record;
  r.set_rank(start.rank);
  r.set_replicas(start.replicas);
  r.set_clock_offset_ns(clock.offset_ns());
  r.set_clock_bound_ns(clock.bound_ns());
  r.set_clock_round_trips(clock.round_trips());
  r.set_peers(absl::StrJoin(meeting.gang.peers(), ", "));
  if (start.replicas == 1) return start;
  auto joined = GangGroup::Join(meeting.gang, meeting.own_host);
  if (!joined.ok()) return joined.status();
  r.set_rendezvous_seconds((*joined)->rendezvous_seconds());
  // Every replica's proposal on the coordinator's clock; the latest wins.
  const int64_t proposal = SteadyNowNs() + clock.offset_ns() + absl::ToInt64Nanoseconds(lead);
  torch::Tensor t = torch::full({1}, proposal, torch::TensorOptions().dtype(torch::kInt64));
  try {
    std::vector<at::Tensor> tensors{t};
    c10d::AllreduceOptions options;
    options.reduceOp = c10d::ReduceOp::MAX;
    (*joined)->group()->allreduce(tensors, options)->wait();
  } catch (const c10::Error& e) {
    return absl::UnavailableError(
        absl::StrCat("serving replicas ", meeting.gang.gang_id(), " rank ", start.rank,
                     ": a replica left while agreeing on the start: ", e.what_without_backtrace()));
  }
  const int64_t agreed = t.item<int64_t>();
  r.set_start_coordinator_ns(agreed);
  start.start_ns = AgreedStartSteadyNs(agreed, clock.offset_ns());
  return start;
}

}  // namespace hetbench::agent
