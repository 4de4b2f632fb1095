#pragma once
/// Reads a job spec from YAML (what `hetbench submit -f job.yaml` takes).
///
///   name: mlp-sweep
///   model: mlp
///   batch_sizes: [64, 128]
///   targets: [{device_kind: cpu}]
///   train: {warmup_steps: 10, min_steps: 0, min_duration_seconds: 1, epochs: 1}
///   inference: {warmup_batches: 2, max_batches: 0}
///   seed: 42
///   threads: 0
///
/// Unknown keys and wrong types are errors that name the key and its line.

#include <string>

#include "absl/status/statusor.h"
#include "hetbench/v1/common.pb.h"

namespace hetbench {

absl::StatusOr<v1::JobSpec> ParseJobSpecYaml(const std::string& yaml_text);

/// The effective spec as YAML, in the same shape ParseJobSpecYaml reads.
std::string JobSpecToYaml(const v1::JobSpec& spec);

}  // namespace hetbench
