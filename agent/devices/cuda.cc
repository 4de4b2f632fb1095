#include "agent/devices/cuda.h"

#include <torch/cuda.h>

#if HETBENCH_WITH_CUDA
#include <c10/cuda/CUDACachingAllocator.h>
#endif

namespace hetbench::agent {

bool CudaCompiledIn() { return HETBENCH_WITH_CUDA != 0; }

int CudaDeviceCount() {
  if (!CudaCompiledIn()) return 0;
  return torch::cuda::is_available() ? static_cast<int>(torch::cuda::device_count()) : 0;
}

std::string CudaUnavailableReason() {
  if (!CudaCompiledIn()) {
    return "this agent was built against a CPU-only LibTorch (Debian's libtorch-dev has no CUDA); build the CUDA "
           "agent against an official CUDA LibTorch (README, \"CUDA agent\")";
  }
  if (CudaDeviceCount() == 0) {
    return "LibTorch has CUDA but sees no usable GPU (driver missing or older than the CUDA runtime, or "
           "CUDA_VISIBLE_DEVICES empty)";
  }
  return "";
}

void CudaResetPeakMemory(int index) {
#if HETBENCH_WITH_CUDA
  c10::cuda::CUDACachingAllocator::resetPeakStats(index);
#else
  (void)index;
#endif
}

int64_t CudaPeakMemoryBytes(int index) {
#if HETBENCH_WITH_CUDA
  const auto stats = c10::cuda::CUDACachingAllocator::getDeviceStats(index);
  return stats.allocated_bytes[static_cast<size_t>(c10::cuda::CUDACachingAllocator::StatType::AGGREGATE)].peak;
#else
  (void)index;
  return -1;
#endif
}

void SyncDevice(const c10::Device& device) {
  if (device.is_cuda()) torch::cuda::synchronize(device.index());
}

}  // namespace hetbench::agent
