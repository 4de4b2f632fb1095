#pragma once
/// A validation job's tasks: one per device of the connected agents that
/// matches a target, each pinned to its device (agent_id + device_id), made
/// when the job is submitted. A target's kind that no connected agent
/// offers becomes a SKIPPED device verdict with the agents' reasons (e.g.
/// "a1: no NVIDIA driver"), never a task that waits.

#include <vector>

#include "absl/status/status.h"

#include "hetbench/v1/agent.pb.h"
#include "hetbench/v1/common.pb.h"

namespace hetbench::server {

struct ExpandedValidation {
  std::vector<v1::TargetSelector> targets;  // one per device, in (agent, device) order
  std::vector<v1::DeviceVerdict> skipped;   // kinds asked for and absent
};

/// `agents`: the connected agents' Hellos, in agent-id order.
ExpandedValidation ExpandValidation(const v1::JobSpec& spec, const std::vector<const v1::Hello*>& agents);

/// A baseline given with the spec must hold the SKU of at least one device
/// it will judge: compared on kind, model, driver and cores (the agent adds
/// threads and its version when it runs). INVALID_ARGUMENT otherwise, naming
/// the baseline's SKUs and the devices'; OK without a baseline or devices.
absl::Status CheckBaselineFits(const v1::JobSpec& spec, const ExpandedValidation& expanded,
                               const std::vector<const v1::Hello*>& agents);

}  // namespace hetbench::server
