#pragma once
/// Minimal line logger to stderr (Debian's Abseil 20220623 has no absl/log).
/// Thread-safe: each line is written with one call.

#include <string>
#include <string_view>

#include "absl/strings/str_cat.h"

namespace hetbench {

/// kDebug lines (per-task assignments and the like) are off by default.
enum class LogLevel { kDebug = -1, kInfo = 0, kWarning = 1, kError = 2 };

/// Lines below this level are dropped (default kInfo). Thread-safe.
void SetMinLogLevel(LogLevel level);
void LogLine(LogLevel level, std::string_view component, std::string_view message);
bool LogEnabled(LogLevel level);

/// The first non-empty line of `text`, trimmed: what goes into a one-line
/// error when a library's message carries a stack trace or a source excerpt.
std::string FirstLine(std::string_view text);

template <typename... Args>
void LogDebug(std::string_view component, const Args&... args) {
  if (!LogEnabled(LogLevel::kDebug)) return;
  LogLine(LogLevel::kDebug, component, absl::StrCat(args...));
}
template <typename... Args>
void LogInfo(std::string_view component, const Args&... args) {
  LogLine(LogLevel::kInfo, component, absl::StrCat(args...));
}
template <typename... Args>
void LogWarning(std::string_view component, const Args&... args) {
  LogLine(LogLevel::kWarning, component, absl::StrCat(args...));
}
template <typename... Args>
void LogError(std::string_view component, const Args&... args) {
  LogLine(LogLevel::kError, component, absl::StrCat(args...));
}

}  // namespace hetbench
