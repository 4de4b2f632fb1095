#include "log.h"

#include <atomic>
#include <chrono>
#include <cstdio>
#include <ctime>
#include <string>

namespace hetbench {

namespace {
std::atomic<int> g_min_level{0};
}

void SetMinLogLevel(LogLevel level) { g_min_level = static_cast<int>(level); }

std::string FirstLine(std::string_view text) {
  size_t start = 0;
  while (start < text.size()) {
    size_t end = text.find('\n', start);
    if (end == std::string_view::npos) end = text.size();
    std::string_view line = text.substr(start, end - start);
    while (!line.empty() && (line.front() == ' ' || line.front() == '\t')) line.remove_prefix(1);
    while (!line.empty() && (line.back() == ' ' || line.back() == '\r' || line.back() == '\t')) line.remove_suffix(1);
    if (!line.empty()) return std::string(line);
    start = end + 1;
  }
  return std::string();
}

bool LogEnabled(LogLevel level) { return static_cast<int>(level) >= g_min_level.load(); }

void LogLine(LogLevel level, std::string_view component, std::string_view message) {
  if (static_cast<int>(level) < g_min_level.load()) return;
  const auto now = std::chrono::system_clock::now();
  const std::time_t t = std::chrono::system_clock::to_time_t(now);
  const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(now.time_since_epoch()).count() % 1000;
  std::tm tm{};
  gmtime_r(&t, &tm);
  char stamp[32];
  std::strftime(stamp, sizeof(stamp), "%Y-%m-%dT%H:%M:%S", &tm);
  const char* tag = level == LogLevel::kError     ? "E"
                    : level == LogLevel::kWarning ? "W"
                    : level == LogLevel::kDebug   ? "D"
                                                  : "I";
  char millis[8];
  std::snprintf(millis, sizeof(millis), ".%03d", static_cast<int>(ms));
  std::string line;
  line.reserve(48 + component.size() + message.size());
  line.append(stamp).append(millis).append("Z ").append(tag).append(" ");
  line.append(component).append(": ").append(message).append("\n");
  std::fwrite(line.data(), 1, line.size(), stderr);
}

}  // namespace hetbench
