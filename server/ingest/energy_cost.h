#pragma once
/// Turns a finished task's stored power readings and timing aggregates into
/// energy per sensor and phase, and cost per phase.

#include <vector>

#include "hetbench/v1/agent.pb.h"
#include "hetbench/v1/common.pb.h"

namespace hetbench::server {

/// Fills task->result().energy and .cost. Needs result.phases (timing
/// aggregates), result.windows (sent by the agent) and the agent's Hello for
/// labels and its advertised cost rate. The machine probe's readings
/// between steps (result.machine_probe.during, with their durations) are left
/// out of each window's energy and each phase's paid time. Pure: no I/O.
void ComputeEnergyAndCost(const v1::JobSpec& spec, const v1::Hello& agent, const std::vector<v1::PowerBatch>& batches,
                          v1::Task* task);

}  // namespace hetbench::server
