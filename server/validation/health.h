#pragma once
/// What a judged validation job means for its devices' health: a FAIL is
/// quarantined (no ordinary task is placed on it; the Placer keeps the
/// quarantine), a DEGRADED too when the job said quarantine_degraded, a
/// PASS clears the device (it leaves quarantine). SKIPPED changes nothing.

#include <string>
#include <utility>
#include <vector>

#include "hetbench/v1/common.pb.h"

namespace hetbench::server {

/// (agent id, health) per judged device of `job`, in the report's order.
std::vector<std::pair<std::string, v1::DeviceHealth>> HealthChanges(const v1::Job& job, double now_unix);

}  // namespace hetbench::server
