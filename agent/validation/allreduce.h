#pragma once
/// The validation suite's one test between agents (common/validate_spec.h
/// kAllReduceTest): one rank of an all-reduce pair joins its gang (Gloo over
/// the c10d store rank 0's agent hosts), checks one all-reduce's sum, then
/// times repetitions of all-reduces of a fixed buffer and reports each
/// repetition's bus bandwidth, 2 (n - 1) / n x bytes / time in GB/s (the
/// convention of nccl-tests, so figures of different world sizes compare).
/// The coordinator pairs agents so that a slow node shows in both of its
/// pairs and a slow partner in one (server/validation/expand.h, judge.h).
///
/// Both ranks run the same number of collectives: the count per repetition
/// is agreed (the larger of the two ranks' calibrations), and before each
/// repetition the ranks agree whether either's box ran out, so one rank never
/// waits alone for a collective the other will not start.
///
/// Threading: the test's own thread (agent/validation/suite.cc runs it boxed).

#include <torch/torch.h>

#include <cstdint>
#include <functional>
#include <string>

#include "hetbench/v1/agent.pb.h"
#include "hetbench/v1/common.pb.h"

namespace hetbench::agent {

struct AllReduceRun {
  v1::GangAssign gang;   // the pair: rank, world size, rendezvous, peers
  std::string own_host;  // this agent's end of the Gloo connections
  torch::Device device = torch::kCPU;
  int64_t bytes = int64_t{16} << 20;
  int repetitions = 8;
  double time_box_seconds = 8;
  std::function<bool()> expired;  // this rank's box ran out or the task was cancelled
};

/// MEASURED with one value per repetition; FAILED when the rendezvous or a
/// collective fails (a peer gone, Gloo's timeout) or the sum is wrong;
/// TIMED_OUT with the repetitions done when either rank's box ran out.
v1::ValidationTest AllReduceBandwidth(const AllReduceRun& run);

}  // namespace hetbench::agent
