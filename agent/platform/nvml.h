#pragma once
/// NVML (the NVIDIA management library) loaded at run time with dlopen, so
/// the agent neither builds nor links against the driver: GPU discovery and
/// GPU power both use it, and a node without a driver reports why.

#include <memory>
#include <string>

#include "absl/status/statusor.h"

namespace hetbench::agent {

using NvmlReturn = int;
using NvmlDevice = void*;
constexpr NvmlReturn kNvmlSuccess = 0;

/// nvmlMemory_t.
struct NvmlMemory {
  unsigned long long total = 0, free = 0, used = 0;
};

class NvmlLibrary {
 public:
  /// dlopen + nvmlInit_v2; errors say what is missing.
  static absl::StatusOr<std::shared_ptr<NvmlLibrary>> Load(const std::string& path);
  ~NvmlLibrary();
  NvmlLibrary(const NvmlLibrary&) = delete;
  NvmlLibrary& operator=(const NvmlLibrary&) = delete;
  std::string Error(NvmlReturn r) const;

  // Required entry points.
  NvmlReturn (*init_)() = nullptr;
  NvmlReturn (*shutdown_)() = nullptr;
  const char* (*error_string_)(NvmlReturn) = nullptr;
  NvmlReturn (*count_)(unsigned*) = nullptr;
  NvmlReturn (*handle_by_index_)(unsigned, NvmlDevice*) = nullptr;
  NvmlReturn (*name_)(NvmlDevice, char*, unsigned) = nullptr;
  NvmlReturn (*power_usage_)(NvmlDevice, unsigned*) = nullptr;  // milliwatts
  // Optional (null when the library lacks them).
  NvmlReturn (*total_energy_)(NvmlDevice, unsigned long long*) = nullptr;  // millijoules, Volta and newer
  NvmlReturn (*uuid_)(NvmlDevice, char*, unsigned) = nullptr;
  NvmlReturn (*memory_)(NvmlDevice, NvmlMemory*) = nullptr;
  NvmlReturn (*driver_version_)(char*, unsigned) = nullptr;
  NvmlReturn (*power_limit_)(NvmlDevice, unsigned*) = nullptr;  // milliwatts
  NvmlReturn (*compute_capability_)(NvmlDevice, int*, int*) = nullptr;

 private:
  explicit NvmlLibrary(void* handle) : handle_(handle) {}
  absl::Status Resolve();

  void* handle_;
  bool initialized_ = false;
};

}  // namespace hetbench::agent
