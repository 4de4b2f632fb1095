#pragma once
/// The agent's clock against the coordinator's (v1::ClockSync), from
/// heartbeat echoes: NTP's estimate with one coordinator timestamp, keeping
/// the echo with the shortest round trip so far, the tightest bound.
/// Thread-safe.

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "hetbench/v1/common.pb.h"
#include "hetbench/v1/agent.pb.h"

namespace hetbench::agent {

class ClockOffset {
 public:
  /// An echo of our heartbeat: agent_ns is when we sent it, coordinator_ns
  /// when the coordinator stamped it; `received_ns` is now on the same
  /// steady clock as agent_ns.
  void OnEcho(const v1::Heartbeat& hb, int64_t received_ns);
  v1::ClockSync Estimate() const;

 private:
  mutable absl::Mutex mu_;
  v1::ClockSync clock_ ABSL_GUARDED_BY(mu_);
};

}  // namespace hetbench::agent
