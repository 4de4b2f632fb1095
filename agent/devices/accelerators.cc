#include "agent/devices/accelerators.h"

#include <algorithm>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/strip.h"
#include "agent/platform/nvml.h"

extern char** environ;

namespace hetbench::agent {

namespace {

std::string Trimmed(std::string s) {
  // Device-tree strings end in NUL; sysfs ones in a newline.
  s.erase(std::find(s.begin(), s.end(), '\0'), s.end());
  return std::string(absl::StripAsciiWhitespace(s));
}

std::string ReadTrimmed(const SysfsReader& root, const std::string& path) {
  auto s = root.ReadFile(path);
  return s.ok() ? Trimmed(*s) : "";
}

struct PciFunction {
  std::string address, vendor, device;
};

std::vector<PciFunction> PciFunctions(const SysfsReader& root) {
  std::vector<PciFunction> out;
  auto entries = root.ListDir("/sys/bus/pci/devices");
  if (!entries.ok()) return out;
  for (const std::string& e : *entries) {
    const std::string dir = absl::StrCat("/sys/bus/pci/devices/", e);
    out.push_back({e, absl::AsciiStrToLower(ReadTrimmed(root, dir + "/vendor")),
                   absl::AsciiStrToLower(ReadTrimmed(root, dir + "/device"))});
  }
  return out;
}

// PCI device ids of NVIDIA (Mellanox, vendor 15b3) BlueField functions: the
// integrated ConnectX network controllers and the SoC management interfaces.
const std::map<std::string, std::string>& BlueFieldPciIds() {
  static const std::map<std::string, std::string> kIds = {
      {"0xa2d2", "BlueField"},   {"0xa2d3", "BlueField"},   {"0xc2d2", "BlueField"},
      {"0xa2d6", "BlueField-2"}, {"0xc2d3", "BlueField-2"}, {"0xa2dc", "BlueField-3"},
      {"0xc2d5", "BlueField-3"}};
  return kIds;
}

std::string GenerationFromModel(const std::string& model) {
  for (const char* g : {"BlueField-3", "BlueField-2"}) {
    if (absl::StrContains(model, g)) return g;
  }
  return "BlueField";
}

}  // namespace

void Discovered::Absent(v1::DeviceKind kind, std::string reason) {
  v1::AbsentDevice a;
  a.set_kind(kind);
  a.set_reason(std::move(reason));
  absent.push_back(std::move(a));
}

int CudaIndex(const v1::Device& device) {
  const auto it = device.attributes().find("cuda_index");
  int index = -1;
  if (it == device.attributes().end() || !absl::SimpleAtoi(it->second, &index)) return -1;
  return index;
}

Discovered DiscoverGpus(const std::string& nvml_library, int cuda_devices, const std::string& cuda_reason) {
  Discovered out;
  auto lib = NvmlLibrary::Load(nvml_library);
  if (!lib.ok()) {
    out.Absent(v1::DEVICE_KIND_GPU, absl::StrCat("NVML: ", lib.status().message()));
    return out;
  }
  NvmlLibrary& nvml = **lib;
  unsigned count = 0;
  if (NvmlReturn e = nvml.count_(&count); e != kNvmlSuccess) {
    out.Absent(v1::DEVICE_KIND_GPU, absl::StrCat("NVML: nvmlDeviceGetCount_v2: ", nvml.Error(e)));
    return out;
  }
  if (count == 0) {
    out.Absent(v1::DEVICE_KIND_GPU, "NVML loaded but reports no GPU");
    return out;
  }
  char driver[96] = {0};
  if (nvml.driver_version_ != nullptr) (void)nvml.driver_version_(driver, sizeof(driver));
  for (unsigned i = 0; i < count; ++i) {
    NvmlDevice dev = nullptr;
    if (NvmlReturn e = nvml.handle_by_index_(i, &dev); e != kNvmlSuccess) {
      out.Absent(v1::DEVICE_KIND_GPU, absl::StrCat("gpu", i, ": nvmlDeviceGetHandleByIndex_v2: ", nvml.Error(e)));
      continue;
    }
    v1::Device d;
    d.set_id(absl::StrCat("gpu", i));
    d.set_kind(v1::DEVICE_KIND_GPU);
    char name[96] = {0};
    (void)nvml.name_(dev, name, sizeof(name));
    d.set_model(name);
    if (driver[0] != '\0') d.set_driver(absl::StrCat("NVIDIA ", driver));
    auto& attrs = *d.mutable_attributes();
    char uuid[96] = {0};
    if (nvml.uuid_ != nullptr && nvml.uuid_(dev, uuid, sizeof(uuid)) == kNvmlSuccess) attrs["uuid"] = uuid;
    NvmlMemory mem;
    if (nvml.memory_ != nullptr && nvml.memory_(dev, &mem) == kNvmlSuccess) {
      d.set_memory_bytes(static_cast<int64_t>(mem.total));
    }
    unsigned limit_mw = 0;
    if (nvml.power_limit_ != nullptr && nvml.power_limit_(dev, &limit_mw) == kNvmlSuccess) {
      attrs["power_limit_watts"] = absl::StrFormat("%.0f", limit_mw / 1000.0);
    }
    int major = 0, minor = 0;
    if (nvml.compute_capability_ != nullptr && nvml.compute_capability_(dev, &major, &minor) == kNvmlSuccess) {
      attrs["compute_capability"] = absl::StrCat(major, ".", minor);
    }
    attrs["cuda_index"] = absl::StrCat(i);
    // NVML and CUDA both enumerate in PCI bus order when
    // CUDA_DEVICE_ORDER=PCI_BUS_ID (the agent sets it before LibTorch starts).
    if (static_cast<int>(i) < cuda_devices) {
      d.add_executors("torch");
      out.devices.push_back(std::move(d));
    } else {
      out.Absent(v1::DEVICE_KIND_GPU,
                 absl::StrCat(d.id(), " \"", d.model(), "\"", attrs.count("uuid") ? " " + attrs["uuid"] : "",
                              " found by NVML but not usable: ",
                              cuda_reason.empty() ? "LibTorch sees fewer CUDA devices" : cuda_reason));
    }
  }
  return out;
}

Discovered DiscoverTpus(const SysfsReader& root, const std::map<std::string, std::string>& env,
                        const v1::RunnerProbe& probe, bool runner_configured) {
  Discovered out;
  std::vector<std::string> found;
  int chips = 0;
  if (auto dev = root.ListDir("/dev"); dev.ok()) {
    for (const std::string& e : *dev) {
      if (absl::StartsWith(e, "accel")) {
        found.push_back("/dev/" + e);
        ++chips;
      }
    }
  }
  int google_pci = 0;
  for (const PciFunction& f : PciFunctions(root)) {
    if (f.vendor == "0x1ae0") ++google_pci;
  }
  if (google_pci > 0) found.push_back(absl::StrCat(google_pci, " Google (1ae0) PCI functions"));
  if (chips == 0) chips = google_pci;
  if (google_pci > 0 && root.ListDir("/dev/vfio").ok()) found.push_back("/dev/vfio");
  std::vector<std::string> vars;
  for (const auto& [k, v] : env) {
    if (absl::StartsWith(k, "TPU_")) vars.push_back(absl::StrCat(k, "=", v));
  }
  if (chips == 0) {
    std::string why = "no /dev/accel* device, no Google (1ae0) PCI function";
    absl::StrAppend(&why, vars.empty() ? ", no TPU_* environment"
                                       : absl::StrCat("; TPU environment set but no chip: ", absl::StrJoin(vars, " ")));
    out.Absent(v1::DEVICE_KIND_TPU, why);
    return out;
  }
  const auto type = env.find("TPU_ACCELERATOR_TYPE");
  const std::string model =
      type != env.end() ? absl::StrCat("Cloud TPU ", type->second) : absl::StrCat("Cloud TPU (", chips, " chips)");
  std::string why_not;
  if (!runner_configured) {
    why_not = "the Python runner is off (--python-runner)";
  } else if (!probe.error().empty()) {
    why_not = absl::StrCat("the Python runner cannot run: ", probe.error());
  } else if (!probe.xla_available()) {
    why_not = "the runner's Python has no torch_xla (install PyTorch/XLA for this TPU)";
  }
  if (!why_not.empty()) {
    out.Absent(v1::DEVICE_KIND_TPU, absl::StrCat(model, " found (", absl::StrJoin(found, ", "), ") but ", why_not));
    return out;
  }
  v1::Device d;
  d.set_id("tpu0");
  d.set_kind(v1::DEVICE_KIND_TPU);
  d.set_model(model);
  d.set_cores(chips);
  d.set_driver(absl::StrCat("PyTorch/XLA ", probe.xla_device()));
  d.add_executors("python");
  (*d.mutable_attributes())["found"] = absl::StrJoin(found, ", ");
  if (!vars.empty()) (*d.mutable_attributes())["environment"] = absl::StrJoin(vars, " ");
  out.devices.push_back(std::move(d));
  return out;
}

BlueField DetectBlueField(const SysfsReader& root, bool arm_cpu) {
  BlueField bf;
  for (const char* path : {"/proc/device-tree/model", "/sys/firmware/devicetree/base/model",
                           "/sys/class/dmi/id/product_name", "/sys/class/dmi/id/board_name"}) {
    const std::string model = ReadTrimmed(root, path);
    if (absl::StrContains(absl::AsciiStrToLower(model), "bluefield")) {
      bf.evidence.push_back(absl::StrCat(path, " = \"", model, "\""));
      if (bf.generation.empty()) bf.generation = GenerationFromModel(model);
    }
  }
  std::vector<std::string> drivers;
  for (const char* dir : {"/sys/bus/platform/drivers", "/sys/module"}) {
    if (auto entries = root.ListDir(dir); entries.ok()) {
      for (const std::string& e : *entries) {
        if (absl::StartsWith(e, "mlxbf")) drivers.push_back(e);
      }
    }
  }
  std::sort(drivers.begin(), drivers.end());
  drivers.erase(std::unique(drivers.begin(), drivers.end()), drivers.end());
  if (!drivers.empty()) bf.evidence.push_back(absl::StrCat("mlxbf drivers: ", absl::StrJoin(drivers, ", ")));
  std::vector<std::string> pci;
  std::string pci_generation;
  for (const PciFunction& f : PciFunctions(root)) {
    if (f.vendor != "0x15b3") continue;
    auto it = BlueFieldPciIds().find(f.device);
    if (it == BlueFieldPciIds().end()) continue;
    pci.push_back(absl::StrCat(f.address, " (15b3:", f.device.substr(2), " ", it->second, ")"));
    if (pci_generation.empty()) pci_generation = it->second;
  }
  const bool soc = !bf.evidence.empty();  // a model string or an mlxbf driver: we are on the SoC
  bf.on_arm_cores = soc && arm_cpu;
  if (!pci.empty()) {
    if (bf.on_arm_cores) {
      bf.evidence.push_back(absl::StrCat("PCI ", absl::StrJoin(pci, ", ")));
    } else {
      bf.host_side = absl::StrCat("PCI ", absl::StrJoin(pci, ", "));
    }
    if (bf.generation.empty()) bf.generation = pci_generation;
  }
  if (soc && !arm_cpu) bf.host_side = absl::StrCat(absl::StrJoin(bf.evidence, "; "), " but the CPU is not Arm");
  return bf;
}

void ApplyBlueField(const BlueField& bf, v1::Device* cpu, Discovered* out) {
  if (!bf.on_arm_cores) {
    out->Absent(v1::DEVICE_KIND_DPU,
                bf.host_side.empty()
                    ? "not a BlueField: no BlueField device-tree/DMI model, no mlxbf driver, no PCI function "
                      "15b3:{a2d2,a2d6,a2dc,c2d2,c2d3,c2d5}"
                    : absl::StrCat("a BlueField is attached (", bf.host_side,
                                   ") but this agent runs on the host; run hetbench-agent on the DPU's Arm cores "
                                   "(deploy/kubernetes dpu DaemonSet, docker/Dockerfile.agent-arm64)"));
    return;
  }
  cpu->set_id("dpu0");
  cpu->set_kind(v1::DEVICE_KIND_DPU);
  cpu->set_model(absl::StrCat(bf.generation.empty() ? "BlueField" : bf.generation, " DPU: ", cpu->model()));
  cpu->set_driver(absl::StrJoin(bf.evidence, "; "));
  (*cpu->mutable_attributes())["bluefield"] = absl::StrJoin(bf.evidence, "; ");
}

std::map<std::string, std::string> ProcessEnvironment() {
  std::map<std::string, std::string> env;
  for (char** e = environ; e != nullptr && *e != nullptr; ++e) {
    const std::string kv = *e;
    const size_t eq = kv.find('=');
    if (eq != std::string::npos) env[kv.substr(0, eq)] = kv.substr(eq + 1);
  }
  return env;
}

}  // namespace hetbench::agent
