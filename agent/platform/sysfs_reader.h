#pragma once
/// Reads small text files under a root (/sys, /proc, or a fake tree in tests).

#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace hetbench::agent {

/// Thread-safe implementations are expected (reads have no shared state).
class SysfsReader {
 public:
  virtual ~SysfsReader() = default;
  /// Whole file, or NOT_FOUND / PERMISSION_DENIED / UNAVAILABLE naming the path.
  virtual absl::StatusOr<std::string> ReadFile(const std::string& path) const = 0;
  /// Entry names of a directory (no "." or ".."), sorted.
  virtual absl::StatusOr<std::vector<std::string>> ListDir(const std::string& path) const = 0;
};

/// Reads the real filesystem under `root` ("" = absolute paths as given).
class RealSysfsReader final : public SysfsReader {
 public:
  explicit RealSysfsReader(std::string root = "") : root_(std::move(root)) {}
  absl::StatusOr<std::string> ReadFile(const std::string& path) const override;
  absl::StatusOr<std::vector<std::string>> ListDir(const std::string& path) const override;

 private:
  std::string root_;
};

/// Parses a file holding one integer (sysfs style, trailing newline allowed).
absl::StatusOr<int64_t> ReadInt(const SysfsReader& reader, const std::string& path);

}  // namespace hetbench::agent
