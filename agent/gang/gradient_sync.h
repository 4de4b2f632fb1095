#pragma once
/// Data-parallel gradient averaging for one rank of a gang, over LibTorch's
/// c10d collectives: rendezvous through a TCPStore that rank 0 hosts, then
/// one all-reduce per step of every gradient flattened into one buffer
/// (Gloo on CPUs; a CUDA build would use NCCL through the same interface).
///
/// Threading: one rank's task thread only. A peer that dies or stalls makes
/// the next collective fail within the gang's timeout (Gloo's own), never
/// hang: the executor fails the attempt and the coordinator retries the gang.

#include <torch/torch.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "agent/gang/gang_group.h"
#include "hetbench/v1/agent.pb.h"

namespace hetbench::agent {

class GradientSync {
 public:
  /// Joins the gang (GangGroup::Join, whose errors it returns).
  static absl::StatusOr<std::unique_ptr<GradientSync>> Join(const v1::GangAssign& gang, const std::string& own_host);

  /// Averages the gradients of `params` over the ranks and sums `vote` over
  /// them (one more float in the same buffer, so all ranks take the same
  /// decision from it, e.g. to stop). Returns the summed vote; the time it
  /// took is last_ns(). Throws c10::Error when a peer is gone or times out.
  double AllReduce(const std::vector<torch::Tensor>& params, double vote);

  int rank() const { return group_->rank(); }
  int world_size() const { return group_->world_size(); }
  /// Bytes of the buffer all-reduced per step (gradients and the vote).
  int64_t bytes_per_step() const { return bytes_per_step_; }
  int64_t last_ns() const { return last_ns_; }
  double rendezvous_seconds() const { return group_->rendezvous_seconds(); }
  GangGroup& gang() const { return *group_; }
  std::string backend() const { return world_size() > 1 ? "gloo" : "none (one rank)"; }

 private:
  explicit GradientSync(std::unique_ptr<GangGroup> group) : group_(std::move(group)) {}
  std::unique_ptr<GangGroup> group_;
  int64_t bytes_per_step_ = 0;
  int64_t last_ns_ = 0;
  torch::Tensor buffer_;
};

}  // namespace hetbench::agent
