#pragma once
/// Short, stable names for enums, as used in the CLI, YAML specs and metric labels.

#include <optional>
#include <string>
#include <string_view>

#include "hetbench/v1/common.pb.h"

namespace hetbench {

std::string DeviceKindName(v1::DeviceKind kind);  // "cpu", "gpu", ..., "any"
std::optional<v1::DeviceKind> ParseDeviceKind(std::string_view name);
std::string PhaseName(v1::Phase phase);        // "train", "infer", "serve", "idle"
std::string JobStateName(v1::JobState state);  // "queued", "running", ...
std::optional<v1::JobState> ParseJobState(std::string_view name);
std::string TaskStateName(v1::TaskState state);
std::string VerdictName(v1::Verdict verdict);  // "PASS", "DEGRADED", "FAIL", "SKIPPED", "-"
std::string TestOutcomeName(v1::TestOutcome outcome);  // "measured", "skipped", "failed", "timed out"
bool IsTerminal(v1::JobState state);
bool IsTerminal(v1::TaskState state);

/// Untrusted input as an error message may quote it: in single quotes, at
/// most 64 characters (longer: its first 32, "...", and its length), bytes
/// outside printable ASCII shown as '?'.
std::string QuotedInput(std::string_view text);

/// The version of this build, e.g. "0.1.0".
std::string HetbenchVersion();

}  // namespace hetbench
