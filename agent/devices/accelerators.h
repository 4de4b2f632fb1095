#pragma once
/// Discovery of GPUs (NVML), Cloud TPUs (device nodes, PCI, environment) and
/// NVIDIA BlueField DPUs (device tree, DMI, PCI, mlxbf drivers). Each reports
/// what it found and, for a kind not offered, exactly why, so the inventory
/// can say "absent" honestly. Paths go through a SysfsReader rooted at "/"
/// (a fixture tree in tests).

#include <map>
#include <string>
#include <vector>

#include "agent/platform/sysfs_reader.h"
#include "hetbench/v1/common.pb.h"
#include "hetbench/v1/runner.pb.h"

namespace hetbench::agent {

/// Devices to offer, and kinds looked for and not offered, with the reason.
struct Discovered {
  std::vector<v1::Device> devices;
  std::vector<v1::AbsentDevice> absent;
  void Absent(v1::DeviceKind kind, std::string reason);
};

/// GPUs through NVML loaded at run time: name, UUID, memory, driver, power
/// limit, compute capability. A GPU is offered (executor "torch", device
/// cuda:N) when LibTorch can use it: `cuda_devices` GPUs are usable, else
/// `cuda_reason` says why not and the GPUs NVML found are listed as absent.
Discovered DiscoverGpus(const std::string& nvml_library, int cuda_devices, const std::string& cuda_reason);

/// The CUDA ordinal DiscoverGpus gave `device` (its "cuda_index"
/// attribute), or -1 when it has none.
int CudaIndex(const v1::Device& device);

/// Cloud TPU chips: /dev/accel* nodes, Google (1ae0) PCI functions, and the
/// TPU_* environment of TPU VMs. Offered as one `tpu` device per host run by
/// the Python runner with PyTorch/XLA, when `probe` says torch_xla imports.
Discovered DiscoverTpus(const SysfsReader& root, const std::map<std::string, std::string>& env,
                        const v1::RunnerProbe& probe, bool runner_configured);

/// What BlueField detection found.
struct BlueField {
  bool on_arm_cores = false;  // this process runs on a BlueField's Arm cores
  std::string generation;     // "BlueField-2", ... when known
  std::vector<std::string> evidence;  // what matched
  std::string host_side;      // a BlueField seen over PCI from a host CPU
};

/// Looks at the device-tree and DMI model strings, mlxbf drivers and modules,
/// and PCI functions of vendor 15b3 with BlueField device ids. `arm_cpu`:
/// whether the CPU is aarch64 (a BlueField's cores are).
BlueField DetectBlueField(const SysfsReader& root, bool arm_cpu);

/// The CPU as a DPU device when on a BlueField's Arm cores (kind dpu, id
/// dpu0, the CPU executor), else it is left as is and the DPU is absent.
void ApplyBlueField(const BlueField& bf, v1::Device* cpu, Discovered* out);

/// The process environment as a map (TPU discovery reads TPU_*).
std::map<std::string, std::string> ProcessEnvironment();

}  // namespace hetbench::agent
