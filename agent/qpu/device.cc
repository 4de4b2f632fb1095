#include "agent/qpu/device.h"

#include "absl/strings/str_cat.h"
#include "agent/devices/accelerators.h"
#include "agent/qpu/huge_pages.h"

namespace hetbench::agent::qpu {

int MaxQubits(int64_t limit_bytes, int bytes_per_amplitude) {
  int q = 0;
  while (q < 40 && (int64_t{bytes_per_amplitude} << (q + 1)) <= limit_bytes) ++q;
  return q;
}

v1::Device QpuSimDevice(const v1::Device& cpu, int64_t memory_limit_bytes) {
  v1::Device d;
  d.set_id("qpu0");
  d.set_kind(v1::DEVICE_KIND_QPU_SIM);
  d.set_model(absl::StrCat("hetbench state-vector simulator on ", cpu.model()));
  d.set_cores(cpu.cores());
  d.set_memory_bytes(memory_limit_bytes);
  auto& a = *d.mutable_attributes();
  a["max_qubits_complex64"] = absl::StrCat(MaxQubits(memory_limit_bytes, 8));
  a["max_qubits_complex128"] = absl::StrCat(MaxQubits(memory_limit_bytes, 16));
  a["precisions"] = "complex64,complex128";
  a["threads"] = absl::StrCat(cpu.cores());
  a["host_device"] = cpu.id();
  a["executor"] = "state-vector simulator (agent/qpu); models qnn, qsim";
  a["backend"] = "native";
  // States of 2 MiB or more ask for huge pages; whether the kernel gives them is this mode's.
  a["huge_pages"] = TransparentHugePagesMode();
  d.add_executors("statevector");
  return d;
}

absl::StatusOr<v1::Device> QpuSimGpuDevice(const v1::Device& gpu, const absl::Status& usable) {
  if (!usable.ok()) {
    return absl::FailedPreconditionError(absl::StrCat("qpu-sim on ", gpu.id(), ": ", usable.message()));
  }
  const int64_t limit = gpu.memory_bytes() / 2;
  v1::Device d;
  d.set_id(absl::StrCat("qpu-", gpu.id()));
  d.set_kind(v1::DEVICE_KIND_QPU_SIM);
  d.set_model(absl::StrCat("hetbench state-vector simulator (LibTorch tensor backend) on ", gpu.model()));
  d.set_memory_bytes(limit);
  auto& a = *d.mutable_attributes();
  a["max_qubits_complex64"] = absl::StrCat(MaxQubits(limit, 8));
  a["max_qubits_complex128"] = absl::StrCat(MaxQubits(limit, 16));
  a["precisions"] = "complex64,complex128";
  a["host_device"] = gpu.id();
  a["backend"] = "tensor";
  if (CudaIndex(gpu) >= 0) a["cuda_index"] = absl::StrCat(CudaIndex(gpu));
  a["executor"] = "state-vector simulator, LibTorch tensor backend (agent/qpu/tensor_backend); model qsim";
  d.add_executors("statevector");
  return d;
}

}  // namespace hetbench::agent::qpu
