#pragma once
/// OpenBLAS's kernel family, settled before anything else runs: the family
/// can only be chosen before the library loads, so when the loaded one is
/// below what the CPU supports the agent re-executes itself with
/// OPENBLAS_CORETYPE set, checks the new kernels against a float64 SGEMM, and
/// keeps them only if they are right. HETBENCH_BLAS_FIX carries the state
/// across the exec.

#include <string>

#include "agent/devices/calibration.h"
#include "hetbench/v1/common.pb.h"

namespace hetbench::agent {

/// `mode`: "auto" (fix a fallback) or "keep" (leave it, flag CPU results).
/// May not return: it execs `argv` again (with /proc/self/exe) to switch.
BlasCheck SettleOpenBlasKernel(const std::string& mode, const v1::Device& cpu, char** argv);

}  // namespace hetbench::agent
