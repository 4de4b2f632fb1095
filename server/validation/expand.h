#pragma once
/// A validation job's tasks: one per device of the connected agents that
/// matches a target, each pinned to its device (agent_id + device_id), made
/// when the job is submitted. A target's kind that no connected agent
/// offers becomes a SKIPPED device verdict with the agents' reasons (e.g.
/// "a1: no NVIDIA driver"), never a task that waits.

#include <vector>

#include "hetbench/v1/agent.pb.h"
#include "hetbench/v1/common.pb.h"

namespace hetbench::server {

struct ExpandedValidation {
  std::vector<v1::TargetSelector> targets;  // one per device, in (agent, device) order
  std::vector<v1::DeviceVerdict> skipped;   // kinds asked for and absent
};

/// `agents`: the connected agents' Hellos, in agent-id order.
ExpandedValidation ExpandValidation(const v1::JobSpec& spec, const std::vector<const v1::Hello*>& agents);

}  // namespace hetbench::server
