#pragma once
/// Job spec defaults, limits and validation. The coordinator is the authority;
/// the CLI uses the same code to fail fast.

#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "common/phase_validity.h"
#include "hetbench/v1/common.pb.h"

namespace hetbench {

/// Limits that keep one job from exhausting the coordinator or a node.
struct SpecLimits {
  static constexpr int kMaxBatchSize = 65536;
  static constexpr int kMaxBatchSizes = 64;
  static constexpr int kMaxTargets = 64;
  static constexpr int kMaxModels = 32;
  static constexpr int kMaxTasks = 1024;
  static constexpr int kMaxWarmupSteps = 100000;
  static constexpr int64_t kMaxMeasuredSteps = 10'000'000;
  static constexpr double kMaxDurationSeconds = 86400.0;
  static constexpr double kMaxEpochs = 1000.0;
  static constexpr int kMaxThreads = 4096;
  static constexpr int kMaxRepeats = 50;
  static constexpr size_t kMaxNameLength = 128;
  static constexpr int kMaxGangSize = 64;
};

/// Top-level layers [begin, end) of a split stage; end = -1: to the last.
struct LayerRange {
  int begin = 0;
  int end = -1;
};
/// Parses "2", "0-3" (inclusive) or "4-" (to the last layer).
absl::StatusOr<LayerRange> ParseLayerRange(const std::string& text);
/// A stage as the CLI writes it, "LAYERS:KIND" ("0-3:cpu", "4-:qpu-sim"):
/// the layers as given (checked by ParseLayerRange or the spec's validation)
/// and the kind as the stage's target. Nothing when there is no known kind
/// after the last colon.
std::optional<v1::SplitStage> ParseStageFlag(const std::string& text);
/// Models that are one stack of top-level layers: they can be split into
/// stages and trained data-parallel.
const std::vector<std::string>& LayerStackModels();
bool IsLayerStackModel(const std::string& model);

/// Models every agent of this version can run.
const std::vector<std::string>& KnownModels();
/// The subset the Python runner implements (its probe lists them).
const std::vector<std::string>& PythonRunnerModels();
/// Datasets every agent of this version can load.
const std::vector<std::string>& KnownDatasets();

/// Executors a target may name: "torch" (C++ LibTorch), "python" (the
/// external PyTorch runner; PyTorch/XLA on TPUs), "statevector" (the
/// built-in state-vector simulator, on qpu-sim devices).
const std::vector<std::string>& KnownExecutors();
bool IsKnownExecutor(const std::string& name);
/// The executor a device uses when a target names none: its first listed
/// (agents from before executors were listed: statevector on qpu-sim, else torch).
std::string DefaultExecutor(const v1::Device& device);

/// Fills every unset field with its default; returns the effective spec.
v1::JobSpec WithDefaults(v1::JobSpec spec);

/// Rewrites spellings a spec may still use from before the glossary
/// (docs/development.md) chose one name per concept: the executor "qsim" is
/// "statevector". Returns one line per rewrite, for the CLI to print as a
/// notice; the coordinator applies it to specs from older clients.
std::vector<std::string> UpgradeOldSpellings(v1::JobSpec* spec);

/// Checks an effective spec (after WithDefaults). On failure returns
/// INVALID_ARGUMENT listing every bad field with its value and the fix,
/// e.g. "batch_sizes[2] = 0: must be >= 1".
absl::Status ValidateJobSpec(const v1::JobSpec& spec);

/// EffectiveMinSteps, ExpectedInferenceBatches and JudgeValidity: common/phase_validity.h.

}  // namespace hetbench
