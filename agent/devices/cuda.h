#pragma once
/// What the LibTorch this agent was built against can do with CUDA. The GPU
/// code paths are compiled in only when CMake found a CUDA LibTorch
/// (HETBENCH_WITH_CUDA); with Debian's CPU-only LibTorch they are excluded
/// and GPUs are reported absent with that reason.

#include <c10/core/Device.h>

#include <cstdint>
#include <string>

namespace hetbench::agent {

/// True when built against a CUDA LibTorch.
bool CudaCompiledIn();
/// GPUs LibTorch can use now (0 without CUDA).
int CudaDeviceCount();
/// Why CudaDeviceCount() is 0, for the inventory; "" when it is not.
std::string CudaUnavailableReason();
/// Resets / reads the peak bytes allocated by LibTorch's CUDA caching
/// allocator on one device (no-ops returning -1 without CUDA).
void CudaResetPeakMemory(int index);
int64_t CudaPeakMemoryBytes(int index);
/// Waits for the device's queued work (CUDA) before a clock is read; a no-op
/// on the CPU, whose LibTorch ops return when done.
void SyncDevice(const c10::Device& device);

}  // namespace hetbench::agent
