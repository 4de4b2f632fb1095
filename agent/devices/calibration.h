#pragma once
/// Per-device calibration (achieved GEMM rate, memory bandwidth) and the
/// check that the math library uses kernels worthy of the CPU.

#include <string>
#include <vector>

#include "hetbench/v1/common.pb.h"

namespace hetbench::agent {

/// "OpenBLAS 0.3.21 ... (kernels: SkylakeX)" when OpenBLAS is loaded, else what is known.
std::string DescribeBlas();
/// OpenBLAS's kernel family name, or "" when OpenBLAS is not loaded.
std::string OpenBlasCoreName();

/// What the agent settled about the math library at start-up (see main.cc).
struct BlasCheck {
  std::string text;
  bool below = false;  // below the CPU and not fixed: its results get flagged
  double sgemm_relative_error = 0;
};

/// What the ISA-vs-kernel check concludes about OpenBLAS's kernel family.
struct BlasKernelVerdict {
  bool below = false;        // the kernels use less of the ISA than the CPU has
  std::string better_core;   // OPENBLAS_CORETYPE to use instead, when below
  std::string text;          // one line for logs and results
};

/// Compares OpenBLAS's kernel family (openblas_get_corename(), any case)
/// with the CPU's ISA flags: AVX-512 (F, BW, VL) deserves SkylakeX-class
/// kernels, AVX2+FMA Haswell-class, AVX Sandybridge. Families it does not
/// know (other architectures) are never judged below.
BlasKernelVerdict CheckBlasKernel(const std::string& core_name, const std::vector<std::string>& isa_flags);

/// Largest |C - C_ref| / max|C_ref| of an n x n x n SGEMM (torch::mm, i.e. the
/// loaded BLAS) against a float64 reference computed by plain loops.
double SgemmRelativeError(int n, uint64_t seed);

/// Measures, with the current LibTorch thread count: the best of `repeats`
/// SGEMMs of gemm_size^3 (after one warm-up) and the best of `repeats`
/// copies of a 256 MiB tensor. Takes about a second on a 2-core CPU. The
/// result also names the BLAS and carries `blas`.
v1::Calibration Calibrate(const BlasCheck& blas, int gemm_size = 2048, int repeats = 3);

}  // namespace hetbench::agent
