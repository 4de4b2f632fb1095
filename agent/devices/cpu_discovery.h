#pragma once
/// Discovers the host CPU as a device from /proc (a fake tree in tests).

#include <string>

#include "absl/status/statusor.h"
#include "hetbench/v1/common.pb.h"

namespace hetbench::agent {

/// Reads `proc_root`/cpuinfo and `proc_root`/meminfo. `usable_cores` > 0
/// caps the core count (the agent passes its CPU affinity); 0 counts the
/// processors listed in cpuinfo.
absl::StatusOr<v1::Device> DiscoverCpu(const std::string& proc_root, int usable_cores);

/// Logical cores this process may run on (sched_getaffinity).
int AffinityCores();

}  // namespace hetbench::agent
