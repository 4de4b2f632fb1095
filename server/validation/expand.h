#pragma once
/// A validation job's tasks: one per device of the connected agents that
/// matches a target, each pinned to its device (agent_id + device_id), made
/// when the job is submitted. A target's kind that no connected agent
/// offers becomes a SKIPPED device verdict with the agents' reasons (e.g.
/// "a1: no NVIDIA driver"), never a task that waits.

#include <utility>
#include <vector>

#include "absl/status/status.h"

#include "hetbench/v1/agent.pb.h"
#include "hetbench/v1/common.pb.h"

namespace hetbench::server {

struct ExpandedValidation {
  std::vector<v1::TargetSelector> targets;  // one per device, in (agent, device) order
  std::vector<v1::DeviceVerdict> skipped;   // kinds asked for and absent
  /// The all-reduce pairs (indices into targets), each a gang of two ranks:
  /// per kind that runs it (RunsAllReduce), the first device of the kind on
  /// each agent, agents in id order a0..a(n-1); two agents make one pair,
  /// n >= 3 a ring (a0,a1) (a1,a2) .. (a(n-1),a0), so every agent is in two
  /// pairs with different partners and the judge can tell a slow node from
  /// a slow partner (server/validation/judge.h).
  std::vector<std::pair<size_t, size_t>> pairs;
};

/// `agents`: the connected agents' Hellos, in agent-id order.
ExpandedValidation ExpandValidation(const v1::JobSpec& spec, const std::vector<const v1::Hello*>& agents);

/// The pairs of ExpandedValidation::pairs for `targets` (pinned, in order).
std::vector<std::pair<size_t, size_t>> AllReducePairs(const v1::ValidateSpec& validate,
                                                      const std::vector<v1::TargetSelector>& targets);

/// A baseline given with the spec must hold the SKU of at least one device
/// it will judge: compared on kind, model, driver and cores (the agent adds
/// threads and its version when it runs). INVALID_ARGUMENT otherwise, naming
/// the baseline's SKUs and the devices'; OK without a baseline or devices.
absl::Status CheckBaselineFits(const v1::JobSpec& spec, const ExpandedValidation& expanded,
                               const std::vector<const v1::Hello*>& agents);

}  // namespace hetbench::server
