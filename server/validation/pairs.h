#pragma once
/// The all-reduce pairs of a validation job (server/validation/expand.h):
/// each device in two pairs (one, with two agents) gets as its all-reduce
/// figure its best pair's. A node whose link is slow is slow in both of its
/// pairs, a healthy partner of it in one only, so the best pair clears the
/// partner and keeps the slow node's figure low; likewise a node that fails
/// every pair FAILs, a partner of it does not. Pure: the job's results in,
/// the same answer every time.

#include <map>
#include <string>
#include <utility>
#include <vector>

#include "hetbench/v1/common.pb.h"

namespace hetbench::server {

/// A device's all-reduce figure: the pair with the highest median among
/// those that measured, else the most severe outcome with every pair's
/// reason; `pairs` lists every pair ("with a1/cpu0 4.1 GB/s; with a3/cpu0
/// failed: ..."), for the verdict's reason. A pair whose task ended without
/// a result counts as FAILED (its task failed) or SKIPPED.
using DeviceKey = std::pair<std::string, std::string>;  // (agent id, device id)

struct PairFigure {
  v1::ValidationTest test;
  std::string pairs;
  std::vector<DeviceKey> partners;
};

/// (agent id, device id) -> that device's all-reduce figure.
std::map<DeviceKey, PairFigure> BestPairTests(const v1::Job& job);

/// Explaining away: a device whose all-reduce verdict is DEGRADED or FAIL
/// while every one of its partners' (two or more) is too has no pair with a
/// device not flagged, so the ring cannot tell whether its link is slow or
/// only its partners': its all-reduce becomes PASS, "not judged", naming
/// them. Decided on the verdicts as they came in (not iterated), so the
/// order of devices does not matter. Misses a slow link only when both of
/// its neighbours have one too.
void ExplainAwayPairs(const std::map<DeviceKey, PairFigure>& figures, const std::vector<v1::DeviceVerdict*>& devices);

}  // namespace hetbench::server
