#pragma once
/// The `validate:` section of a job spec (`hetbench validate`): its defaults,
/// its checks, the suite each device kind runs, and what makes devices one
/// SKU. The coordinator fills the defaults and judges (server/validation/);
/// the agent runs the suite (agent/validation/); the CLI checks with it to
/// fail fast. docs/validation.md describes the method.

#include <cstdint>
#include <string>
#include <vector>

#include "hetbench/v1/common.pb.h"

namespace hetbench {

/// The task's model name in a validation job: a job lists no models of its own.
inline constexpr char kValidateModel[] = "validate";
inline constexpr char kBaselineSchema[] = "hetbench.baseline.v1";

/// Whether the spec asks for a validation (validate.level is set).
bool IsValidate(const v1::JobSpec& spec);

/// Fills the validate section's unset fields, models ["validate"] and targets
/// (every device) where empty (a no-op without a level). Runs before the
/// ordinary defaults, which then leave the models and targets alone.
void FillValidateDefaults(v1::JobSpec* spec);

/// Appends one line per bad validate field, naming it and the fix: an unknown
/// level or test, a time box <= 0, thresholds outside (0, 1), a baseline of
/// another schema, and what a validation cannot be combined with.
void CheckValidate(const v1::JobSpec& spec, std::vector<std::string>* problems);

/// A baseline file's problems (schema, SKUs, figures), each naming the field;
/// `field` prefixes them ("validate.baseline", or the file's name).
void CheckBaseline(const v1::Baseline& baseline, const std::string& field, std::vector<std::string>* problems);

/// The tests a device of `kind` runs at `level`, in order, before
/// validate.tests narrows them.
std::vector<std::string> SuiteFor(v1::DeviceKind kind, const std::string& level);

/// Every test name any suite has (the per-device suites and kAllReduceTest).
const std::vector<std::string>& KnownValidationTests();

/// The test run by pairs of agents rather than by one device: Gloo's
/// all-reduce between one device of a kind on each of two agents, its bus
/// bandwidth in GB/s (docs/validation.md "All-reduce between agents").
inline constexpr char kAllReduceTest[] = "allreduce";

/// Whether devices of `kind` take part in the all-reduce pairs: CPUs, GPUs
/// and DPUs (not the quantum simulator, and not TPUs, whose collectives the
/// agent's LibTorch cannot run), unless validate.tests leaves it out.
bool RunsAllReduce(const v1::ValidateSpec& validate, v1::DeviceKind kind);

/// The all-reduce's buffer at `level`: 16 MiB quick, 64 MiB standard.
int64_t AllReduceBytes(const std::string& level);

/// The key of devices that should measure alike: kind | model | driver |
/// cores | threads | agent version ("-" for an empty part). The device's
/// model and driver are the agent's own strings (agents send them; the key
/// is never used in SQL or HTML unescaped).
std::string SkuOf(const v1::Device& device, int threads, const std::string& agent_version);

}  // namespace hetbench
