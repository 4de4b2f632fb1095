#include "agent/clock_offset.h"

namespace hetbench::agent {

void ClockOffset::OnEcho(const v1::Heartbeat& hb, int64_t received_ns) {
  // The reply was stamped at some moment of the round trip, so the offset
  // is known within half of it.
  const int64_t rtt_ns = received_ns - hb.agent_ns();
  if (rtt_ns < 0) return;
  const int64_t offset_ns = hb.coordinator_ns() - (hb.agent_ns() + rtt_ns / 2);
  absl::MutexLock l(&mu_);
  const int trips = clock_.round_trips() + 1;
  if (clock_.round_trips() == 0 || rtt_ns / 2 <= clock_.bound_ns()) {
    clock_.set_offset_ns(offset_ns);
    clock_.set_bound_ns(rtt_ns / 2 + 1);
  }
  clock_.set_round_trips(trips);
}

v1::ClockSync ClockOffset::Estimate() const {
  absl::MutexLock l(&mu_);
  return clock_;
}

}  // namespace hetbench::agent
