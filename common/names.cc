#include "names.h"

#include "common/version.h"

namespace hetbench {

std::string DeviceKindName(v1::DeviceKind kind) {
  switch (kind) {
    case v1::DEVICE_KIND_CPU:
      return "cpu";
    case v1::DEVICE_KIND_GPU:
      return "gpu";
    case v1::DEVICE_KIND_TPU:
      return "tpu";
    case v1::DEVICE_KIND_DPU:
      return "dpu";
    case v1::DEVICE_KIND_QPU_SIM:
      return "qpu-sim";
    default:
      return "any";
  }
}

std::optional<v1::DeviceKind> ParseDeviceKind(std::string_view name) {
  for (int k = v1::DeviceKind_MIN; k <= v1::DeviceKind_MAX; ++k) {
    const auto kind = static_cast<v1::DeviceKind>(k);
    if (v1::DeviceKind_IsValid(k) && DeviceKindName(kind) == name) return kind;
  }
  return std::nullopt;
}

std::string PhaseName(v1::Phase phase) {
  switch (phase) {
    case v1::PHASE_TRAIN:
      return "train";
    case v1::PHASE_INFER:
      return "infer";
    case v1::PHASE_SERVE:
      return "serve";
    case v1::PHASE_IDLE:
      return "idle";
    case v1::PHASE_VALIDATE:
      return "validate";
    case v1::PHASE_TTFT:
      return "ttft";
    case v1::PHASE_TPOT:
      return "tpot";
    default:
      return "unspecified";
  }
}

std::optional<v1::JobState> ParseJobState(std::string_view name) {
  for (int s = v1::JOB_STATE_QUEUED; s <= v1::JOB_STATE_CANCELLED; ++s) {
    if (JobStateName(static_cast<v1::JobState>(s)) == name) return static_cast<v1::JobState>(s);
  }
  return std::nullopt;
}

std::string JobStateName(v1::JobState state) {
  switch (state) {
    case v1::JOB_STATE_QUEUED:
      return "queued";
    case v1::JOB_STATE_RUNNING:
      return "running";
    case v1::JOB_STATE_SUCCEEDED:
      return "succeeded";
    case v1::JOB_STATE_FAILED:
      return "failed";
    case v1::JOB_STATE_CANCELLED:
      return "cancelled";
    default:
      return "unspecified";
  }
}

std::string VerdictName(v1::Verdict verdict) {
  switch (verdict) {
    case v1::VERDICT_PASS:
      return "PASS";
    case v1::VERDICT_DEGRADED:
      return "DEGRADED";
    case v1::VERDICT_FAIL:
      return "FAIL";
    case v1::VERDICT_SKIPPED:
      return "SKIPPED";
    default:
      return "-";
  }
}

std::string TestOutcomeName(v1::TestOutcome outcome) {
  switch (outcome) {
    case v1::TEST_OUTCOME_MEASURED:
      return "measured";
    case v1::TEST_OUTCOME_SKIPPED:
      return "skipped";
    case v1::TEST_OUTCOME_FAILED:
      return "failed";
    case v1::TEST_OUTCOME_TIMED_OUT:
      return "timed out";
    default:
      return "-";
  }
}

std::string TaskStateName(v1::TaskState state) {
  switch (state) {
    case v1::TASK_STATE_QUEUED:
      return "queued";
    case v1::TASK_STATE_RUNNING:
      return "running";
    case v1::TASK_STATE_SUCCEEDED:
      return "succeeded";
    case v1::TASK_STATE_FAILED:
      return "failed";
    case v1::TASK_STATE_CANCELLED:
      return "cancelled";
    default:
      return "unspecified";
  }
}

bool IsTerminal(v1::JobState s) {
  return s == v1::JOB_STATE_SUCCEEDED || s == v1::JOB_STATE_FAILED || s == v1::JOB_STATE_CANCELLED;
}

bool IsTerminal(v1::TaskState s) {
  return s == v1::TASK_STATE_SUCCEEDED || s == v1::TASK_STATE_FAILED || s == v1::TASK_STATE_CANCELLED;
}

std::string QuotedInput(std::string_view text) {
  const bool cut = text.size() > 64;
  std::string out(cut ? text.substr(0, 32) : text);
  for (char& c : out) {
    if (c < 0x20 || c > 0x7e) c = '?';
  }
  return cut ? "'" + out + "...' (" + std::to_string(text.size()) + " characters)" : "'" + out + "'";
}

std::string HetbenchVersion() { return HETBENCH_VERSION_STRING; }

}  // namespace hetbench
