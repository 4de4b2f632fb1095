#include "agent/platform/nvml.h"

#include <dlfcn.h>

#include <type_traits>

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
  const char* missing = nullptr;
  auto bind = [this](auto& fn, const char* name) {
    fn = Symbol<std::remove_reference_t<decltype(fn)>>(handle_, name);
    return fn != nullptr;
  };
  auto require = [&](auto& fn, const char* name) {
    if (!bind(fn, name) && missing == nullptr) missing = name;
  };
  require(init_, "nvmlInit_v2");
  require(shutdown_, "nvmlShutdown");
  require(error_string_, "nvmlErrorString");
  require(count_, "nvmlDeviceGetCount_v2");
  require(handle_by_index_, "nvmlDeviceGetHandleByIndex_v2");
  require(name_, "nvmlDeviceGetName");
  require(power_usage_, "nvmlDeviceGetPowerUsage");
  if (missing != nullptr) return absl::UnavailableError(absl::StrCat("NVML library lacks ", missing));
  // Optional: older drivers lack some; their fields stay empty.
  bind(total_energy_, "nvmlDeviceGetTotalEnergyConsumption");
  bind(uuid_, "nvmlDeviceGetUUID");
  bind(memory_, "nvmlDeviceGetMemoryInfo");
  bind(driver_version_, "nvmlSystemGetDriverVersion");
  bind(power_limit_, "nvmlDeviceGetPowerManagementLimit");
  bind(compute_capability_, "nvmlDeviceGetCudaComputeCapability");
  return absl::OkStatus();
}

}  // namespace hetbench::agent
