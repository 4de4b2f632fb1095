#pragma once
/// A replica of a replicated server run (serving.replicas): N agents serve
/// one seeded global schedule together, query i on replica i mod N. After
/// warm-up the replicas meet (the gang's c10d store, GangGroup) and agree on
/// the start of the schedule on the coordinator's clock, which each agent
/// knows within its heartbeat-echo bound (agent/clock_offset.h): every
/// replica proposes its own now plus a lead, and the latest proposal wins,
/// so the start is after every replica is ready. Each then issues its share
/// from that instant on its own steady clock.
///
/// Threading: the task's thread.

#include <cstdint>
#include <functional>
#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "hetbench/v1/agent.pb.h"
#include "hetbench/v1/common.pb.h"

namespace hetbench::agent {

/// What a replica needs to meet the others.
struct ReplicaMeeting {
  v1::GangAssign gang;
  std::string own_host = "127.0.0.1";    // this agent's address for the gang's connections
  std::function<v1::ClockSync()> clock;  // this agent's offset to the coordinator's clock
};

/// Where a replica starts: its share of the schedule and the instant, on
/// its steady clock, at which the global schedule's time 0 falls.
struct ReplicaStart {
  int rank = 0;
  int replicas = 1;
  int64_t start_ns = 0;   // 0: a run of one starts when it is issued
  v1::ReplicaRun record;  // for result.serving.replica
};

/// Meets the replicas and agrees on the start, `lead` after the last one
/// proposes it. UNAVAILABLE (retryable) when a replica does not arrive
/// within the gang's timeout or leaves during the meeting.
absl::StatusOr<ReplicaStart> MeetReplicas(const ReplicaMeeting& meeting, absl::Duration lead);

/// The start both proposals agree on, as MeetReplicas computes it: the
/// latest of the replicas' proposals (coordinator ns), back on this agent's
/// steady clock by its offset (coordinator = steady + offset).
int64_t AgreedStartSteadyNs(int64_t latest_proposal_coordinator_ns, int64_t offset_ns);

}  // namespace hetbench::agent
