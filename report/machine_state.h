#pragma once
/// Was the machine the same on both sides of a comparison? The agent times a
/// fixed kernel around each CPU run (v1::MachineProbe; agent/executors/
/// machine_probe.h); compare and history ask here before giving a verdict.

#include <string>
#include <vector>

#include "hetbench/v1/coordinator.pb.h"

namespace hetbench::report {

/// The machine probe (v1::MachineProbe, timed by the agent around each CPU
/// run) beyond +/-5% between the sides: the machine was in another state.
/// On this project's VM (2 threads) its median call took 148-161 us over 20
/// minutes of one state (+/-4% of its middle) and 175-187 us in the slow
/// state, in which mlp's training steps took 31% longer (docs/reports.md,
/// "Jobs taken minutes apart, and the machine probe").
inline constexpr double kProbeBeyond = 0.05;

/// How MachineDiffered's reason begins (readers of `invalid` match on it).
inline constexpr char kMachineDiffered[] = "the machine differed";

/// "the machine differed: its probe took 1.17x as long around B's runs as
/// around A's" when the sides' probes (geometric means over their runs)
/// differ by more than kProbeBeyond; "" when they do not, or cannot be
/// compared: a run without a probe, or on another agent, device or thread
/// count than A's first run. ComparePhase and CompareRunPhase withhold the
/// verdict on it as on an INVALID phase (`invalid`; --compare-anyway marks it).
std::string MachineDiffered(const std::vector<const v1::Task*>& a, const std::vector<const v1::Task*>& b);

}  // namespace hetbench::report
