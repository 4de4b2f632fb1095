#include "agent/devices/nvml.h"

#include <dlfcn.h>

#include "absl/strings/str_cat.h"

namespace hetbench::agent {

namespace {

template <typename F>
F Symbol(void* handle, const char* name) {
  return reinterpret_cast<F>(dlsym(handle, name));
}

}  // namespace

absl::StatusOr<std::shared_ptr<NvmlLibrary>> NvmlLibrary::Load(const std::string& path) {
  void* handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (handle == nullptr) {
    const char* err = dlerror();
    return absl::NotFoundError(
        absl::StrCat("cannot load ", path, ": ", err ? err : "unknown error", " (no NVIDIA driver on this node)"));
  }
  auto lib = std::shared_ptr<NvmlLibrary>(new NvmlLibrary(handle));
  if (auto s = lib->Resolve(); !s.ok()) return s;
  if (NvmlReturn r = lib->init_(); r != kNvmlSuccess) {
    return absl::UnavailableError(absl::StrCat("nvmlInit_v2: ", lib->Error(r)));
  }
  lib->initialized_ = true;
  return lib;
}

NvmlLibrary::~NvmlLibrary() {
  if (initialized_ && shutdown_) shutdown_();
  dlclose(handle_);
}

std::string NvmlLibrary::Error(NvmlReturn r) const {
  const char* s = error_string_ ? error_string_(r) : nullptr;
  return s ? absl::StrCat(s, " (", r, ")") : absl::StrCat("NVML error ", r);
}

absl::Status NvmlLibrary::Resolve() {
  init_ = Symbol<decltype(init_)>(handle_, "nvmlInit_v2");
  shutdown_ = Symbol<decltype(shutdown_)>(handle_, "nvmlShutdown");
  error_string_ = Symbol<decltype(error_string_)>(handle_, "nvmlErrorString");
  count_ = Symbol<decltype(count_)>(handle_, "nvmlDeviceGetCount_v2");
  handle_by_index_ = Symbol<decltype(handle_by_index_)>(handle_, "nvmlDeviceGetHandleByIndex_v2");
  name_ = Symbol<decltype(name_)>(handle_, "nvmlDeviceGetName");
  power_usage_ = Symbol<decltype(power_usage_)>(handle_, "nvmlDeviceGetPowerUsage");
  const std::pair<const char*, bool> required[] = {
      {"nvmlInit_v2", init_ != nullptr},
      {"nvmlShutdown", shutdown_ != nullptr},
      {"nvmlErrorString", error_string_ != nullptr},
      {"nvmlDeviceGetCount_v2", count_ != nullptr},
      {"nvmlDeviceGetHandleByIndex_v2", handle_by_index_ != nullptr},
      {"nvmlDeviceGetName", name_ != nullptr},
      {"nvmlDeviceGetPowerUsage", power_usage_ != nullptr}};
  for (const auto& [name, found] : required) {
    if (!found) return absl::UnavailableError(absl::StrCat("NVML library lacks ", name));
  }
  total_energy_ = Symbol<decltype(total_energy_)>(handle_, "nvmlDeviceGetTotalEnergyConsumption");
  uuid_ = Symbol<decltype(uuid_)>(handle_, "nvmlDeviceGetUUID");
  memory_ = Symbol<decltype(memory_)>(handle_, "nvmlDeviceGetMemoryInfo");
  driver_version_ = Symbol<decltype(driver_version_)>(handle_, "nvmlSystemGetDriverVersion");
  power_limit_ = Symbol<decltype(power_limit_)>(handle_, "nvmlDeviceGetPowerManagementLimit");
  compute_capability_ = Symbol<decltype(compute_capability_)>(handle_, "nvmlDeviceGetCudaComputeCapability");
  return absl::OkStatus();
}

}  // namespace hetbench::agent
