#pragma once
/// Split (pipeline) execution of a layer stack inside one agent: stage s
/// runs its contiguous layers on its device; activations go forward and
/// their gradients back between stages (a device copy, or nothing when the
/// stages share memory), each timed with the devices synchronised.
///
/// Threading: the task thread only.

#include <torch/torch.h>

#include <functional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "hetbench/v1/common.pb.h"

namespace hetbench::agent {

struct SplitStagePlan {
  int begin = 0, end = 0;  // top-level layers [begin, end)
  torch::Device device{torch::kCPU};
  v1::Device info;         // the agent's device the stage runs on
};

/// The stages of `split` over a stack of `layers` layers on `devices` (one
/// per stage, in order). Refuses ranges past the stack or leaving layers out.
absl::StatusOr<std::vector<SplitStagePlan>> PlanSplit(const v1::SplitSpec& split, size_t layers,
                                                      const std::vector<v1::Device>& devices);

/// One stage's share of one step.
struct StageTimes {
  int64_t forward_ns = 0, backward_ns = 0, transfer_ns = 0, transfer_bytes = 0;
};

using LossFn = std::function<torch::Tensor(const torch::Tensor& out, const torch::Tensor& x, const torch::Tensor& y)>;

/// Forward stage by stage, the loss, then backward stage by stage from the
/// last; gradients are left in the parameters (the caller's optimizer steps).
/// Returns the loss; `times[0 .. plan.size())` get one entry per stage
/// (written in place: the caller's buffer, nothing allocated for them).
torch::Tensor SplitForwardBackward(torch::nn::Sequential& net, const std::vector<SplitStagePlan>& plan,
                                   const torch::Tensor& x, const torch::Tensor& y, const LossFn& loss,
                                   StageTimes* times);

/// Per stage: medians over the steps of forward, backward, transfer (time
/// and bytes) and idle (the step minus the stage's own work). `times` holds
/// plan.size() entries per step, step after step.
std::vector<v1::SplitStageResult> SummarizeSplit(const std::vector<SplitStagePlan>& plan,
                                                 const std::vector<StageTimes>& times,
                                                 const std::vector<int64_t>& step_ns);

}  // namespace hetbench::agent
