#pragma once
/// A serving task on a simulated device (the fleet simulator): the task's
/// scenario played against a queueing model of the device instead of a
/// model run. Arrivals are the real issuer's (the seeded Poisson schedule
/// cut at both minimums; offline: all at once; single_stream and
/// multi_stream: the next when the last is answered); `instances` servers
/// take, whenever one is free, every query that has arrived (up to the
/// largest batch) as one batch of service time overhead + size / the
/// profile's samples/s, with the profile's jitter. Each query's latency is
/// counted from its scheduled time, as the agent counts it. A peak search
/// is not simulated: its task is one server run at its first rate, and the
/// result says so. Everything it makes is labelled simulated.

#include <cstdint>
#include <vector>

#include "bench/fleet/sim_fleet.h"
#include "hetbench/v1/agent.pb.h"

namespace hetbench::fleet {

struct SimulatedServing {
  std::vector<v1::SampleBatch> batches;  // SERVE samples, seq 0.., at most `per_batch` each
  v1::ServingRun run;                    // the agent's figures
  int64_t end_ns = 0;                    // the run's window end on the task's axis (it starts at 0)
  int64_t queries = 0;
};

SimulatedServing SimulateServing(const v1::Assign& a, v1::DeviceKind kind, const Profile& p, uint64_t seed,
                                 int per_batch);

}  // namespace hetbench::fleet
