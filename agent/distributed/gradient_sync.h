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
#include "hetbench/v1/agent.pb.h"

namespace hetbench::agent {

class GradientSync {
 public:
  /// Joins the gang: rank 0 opens the TCPStore at master_host:master_port,
  /// every rank connects to it and builds the process group, its own end of
  /// the connections on `own_host`. UNAVAILABLE (retryable) when the store's
  /// port is taken or a peer does not arrive within gang.timeout_seconds.
  /// A gang of one needs no peers and opens nothing.
  static absl::StatusOr<std::unique_ptr<GradientSync>> Join(const v1::GangAssign& gang, const std::string& own_host);
  ~GradientSync();

  /// Averages the gradients of `params` over the ranks and sums `vote` over
  /// them (one more float in the same buffer, so all ranks take the same
  /// decision from it, e.g. to stop). Returns the summed vote; the time it
  /// took is last_ns(). Throws c10::Error when a peer is gone or times out.
  double AllReduce(const std::vector<torch::Tensor>& params, double vote);

  int rank() const { return rank_; }
  int world_size() const { return world_; }
  /// Bytes of the buffer all-reduced per step (gradients and the vote).
  int64_t bytes_per_step() const { return bytes_per_step_; }
  int64_t last_ns() const { return last_ns_; }
  double rendezvous_seconds() const { return rendezvous_seconds_; }
  std::string backend() const { return world_ > 1 ? "gloo" : "none (one rank)"; }

 private:
  GradientSync(int rank, int world);
  int rank_ = 0, world_ = 1;
  int64_t bytes_per_step_ = 0;
  int64_t last_ns_ = 0;
  double rendezvous_seconds_ = 0;
  struct Group;  // the c10d store and process group (kept out of this header)
  std::unique_ptr<Group> group_;
  torch::Tensor buffer_;
};

}  // namespace hetbench::agent
