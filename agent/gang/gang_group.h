#pragma once
/// One rank's membership of a gang: the c10d TCPStore (hosted by rank 0's
/// agent) and the Gloo process group over it. Shared by data-parallel
/// gradient averaging (gradient_sync.h) and split stages across agents
/// (stage_link.h).
///
/// Threading: one rank's task thread only. Every collective or
/// point-to-point operation on it throws c10::Error when a peer is gone or
/// does not answer within the gang's timeout (Gloo's own), never hangs.

#include <torch/torch.h>

#include <functional>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "hetbench/v1/agent.pb.h"

namespace c10d {
class ProcessGroup;
}  // namespace c10d

namespace hetbench::agent {

class GangGroup {
 public:
  /// Joins: rank 0 opens the TCPStore at master_host:master_port, every rank
  /// connects to it and builds the process group, its own end of the
  /// connections on `own_host`; every key it writes carries gang.round, so
  /// only ranks of one round meet. UNAVAILABLE (retryable) when the store's
  /// port is taken or a peer does not arrive within gang.timeout_seconds.
  /// A gang of one opens nothing.
  static absl::StatusOr<std::unique_ptr<GangGroup>> Join(const v1::GangAssign& gang, const std::string& own_host);
  ~GangGroup();

  int rank() const { return rank_; }
  int world_size() const { return world_; }
  double rendezvous_seconds() const { return rendezvous_seconds_; }
  /// The process group; null for a gang of one.
  c10d::ProcessGroup* group() const;
  /// Runs `fn` on every rank in turn, rank 0 first, the others waiting at a
  /// barrier, then a last barrier: no rank's `fn` overlaps another's (ranks
  /// may share a host). Every rank must call it. A gang of one just runs it.
  /// Throws c10::Error when a peer is gone or does not arrive in time.
  void InTurn(const std::function<void()>& fn);

 private:
  GangGroup(int rank, int world);
  int rank_ = 0, world_ = 1;
  double rendezvous_seconds_ = 0;
  struct Impl;  // the c10d store and process group (kept out of this header)
  std::unique_ptr<Impl> impl_;
};

}  // namespace hetbench::agent
