#pragma once
/// A model of the zoo as a serving system's batch compute: eval mode, no
/// autograd, query i answered from test image i mod N, the outputs made on
/// the device before the batch counts as answered.

#include <torch/torch.h>

#include "absl/status/status.h"
#include "agent/models/workload.h"
#include "agent/serving/batching_server.h"

namespace hetbench::agent {

/// The compute for BatchingServer: `workload`'s inference of the batch's
/// images on `device` (instances share the one model: forwards without
/// autograd do not change it). `workload` must outlive the server; call
/// after SetTraining(false) and To(device), as PrepareForServing does.
BatchingServer::Compute WorkloadCompute(Workload* workload, const torch::Device& device);

/// The calibration models that make the harness checkable: `NullCompute`
/// returns at once (what is left is the harness's own cost), and
/// `FixedServiceCompute` busy-waits exactly `per_batch` (with one instance
/// and max_batch 1, an M/D/1 queue whose latencies are known exactly from
/// the arrivals).
BatchingServer::Compute NullCompute();
BatchingServer::Compute FixedServiceCompute(absl::Duration per_batch);

/// Puts `workload` in eval mode on `device` and runs `warmup_batches` batches
/// of `batch` images, untimed (first-call allocations, kernel selection).
absl::Status PrepareForServing(Workload* workload, const torch::Device& device, int batch, int warmup_batches);

}  // namespace hetbench::agent
