#pragma once
/// A benchmark phase's verdict: the steps and batches it had to reach, and
/// whether it is VALID (its minimums, its spread, the math library). The
/// coordinator judges; the agent's executor computes the steps it aims for
/// with the same function.

#include <cstdint>
#include <vector>

#include "hetbench/v1/common.pb.h"

namespace hetbench {

/// Measured training steps for a task: min_steps, or when it is 0, the steps
/// of `epochs` passes over `dataset_size` minus the warm-up steps (>= 1).
int64_t EffectiveMinSteps(const v1::JobSpec& spec, int batch_size, int64_t dataset_size);

/// Measured inference batches a task must reach: the whole test split, or
/// inference.max_batches when smaller.
int64_t ExpectedInferenceBatches(const v1::JobSpec& spec, int batch_size, int64_t test_size);

/// Sets phase.valid and phase.invalid_reasons from the spec's minimums and
/// spread limit. `expected_steps` is what the phase had to reach; a train
/// phase without one (the agent did not send min_train_steps) is invalid. A
/// `calibration` whose math library stayed below the CPU (blas_below) makes
/// the phase invalid too: the CPU was not measured as it is. With the step
/// durations `in_order` (as they ran; empty when not kept), a "too noisy"
/// reason says when the cause is two speeds of the machine (step_modes.h).
void JudgeValidity(const v1::JobSpec& spec, int64_t expected_steps, v1::PhaseResult* phase,
                   const v1::Calibration* calibration = nullptr, const std::vector<int64_t>* in_order = nullptr);

}  // namespace hetbench
