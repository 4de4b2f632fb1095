#include "agent/devices/calibration.h"

#include <ATen/CPUGeneratorImpl.h>
#include <dlfcn.h>
#include <torch/torch.h>

#include <algorithm>
#include <cctype>
#include <cmath>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/clock.h"

namespace hetbench::agent {

namespace {

// x86 SIMD level of an OpenBLAS kernel family: 0 SSE, 1 AVX, 2 AVX2, 3 AVX-512; -1 unknown.
int KernelLevel(const std::string& core) {
  static const std::vector<std::pair<const char*, int>> kLevels = {
      {"prescott", 0},   {"core2", 0},     {"penryn", 0},      {"dunnington", 0},     {"nehalem", 0},
      {"atom", 0},       {"katmai", 0},    {"coppermine", 0},  {"northwood", 0},      {"banias", 0},
      {"opteron", 0},    {"barcelona", 0}, {"bobcat", 0},      {"sandybridge", 1},    {"bulldozer", 1},
      {"piledriver", 1}, {"steamroller", 1}, {"excavator", 1}, {"haswell", 2},        {"zen", 2},
      {"skylakex", 3},   {"cooperlake", 3}, {"sapphirerapids", 3}};
  for (const auto& [name, level] : kLevels) {
    if (core == name) return level;
  }
  return -1;
}

}  // namespace

std::string OpenBlasCoreName() {
  using Fn = char* (*)();
  auto fn = reinterpret_cast<Fn>(dlsym(RTLD_DEFAULT, "openblas_get_corename"));
  return fn ? std::string(fn()) : std::string();
}

std::string DescribeBlas() {
  using Fn = char* (*)();
  auto config = reinterpret_cast<Fn>(dlsym(RTLD_DEFAULT, "openblas_get_config"));
  if (config == nullptr) return "not OpenBLAS (reference BLAS or MKL; install libopenblas0-openmp)";
  return absl::StrCat(config(), " (kernels: ", OpenBlasCoreName(), ")");
}

BlasKernelVerdict CheckBlasKernel(const std::string& core_name, const std::vector<std::string>& isa_flags) {
  std::string core = core_name;
  for (char& c : core) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  auto has = [&](const char* f) { return std::find(isa_flags.begin(), isa_flags.end(), f) != isa_flags.end(); };
  int cpu_level = 0;
  const char* best = "Prescott";
  const char* isa = "SSE";
  if (has("avx512f") && has("avx512bw") && has("avx512vl")) {
    cpu_level = 3, best = "SkylakeX", isa = "AVX-512";
  } else if (has("avx2") && has("fma")) {
    cpu_level = 2, best = "Haswell", isa = "AVX2+FMA";
  } else if (has("avx")) {
    cpu_level = 1, best = "Sandybridge", isa = "AVX";
  }
  BlasKernelVerdict v;
  if (core.empty()) {
    v.text = "not OpenBLAS: kernel family unknown (install libopenblas0-openmp)";
    return v;
  }
  const int level = KernelLevel(core);
  if (level < 0) {
    v.text = absl::StrCat("OpenBLAS ", core_name, " kernels: a family this check does not grade");
  } else if (level < cpu_level) {
    v.below = true;
    v.better_core = best;
    v.text = absl::StrCat("OpenBLAS ", core_name, " kernels on a CPU with ", isa, ": ", best, " kernels would use it");
  } else {
    v.text = absl::StrCat("OpenBLAS ", core_name, " kernels match the CPU's ", isa);
  }
  return v;
}

double SgemmRelativeError(int n, uint64_t seed) {
  // A generator of its own: the process-wide one belongs to builds and dropout (global_generator.h).
  auto gen = at::make_generator<at::CPUGeneratorImpl>(seed);
  torch::Tensor a = torch::rand({n, n}, gen) * 2 - 1;
  torch::Tensor b = torch::rand({n, n}, gen) * 2 - 1;
  torch::Tensor c = torch::mm(a, b).contiguous();
  const float* pa = a.data_ptr<float>();
  const float* pb = b.data_ptr<float>();
  const float* pc = c.data_ptr<float>();
  std::vector<double> ref(static_cast<size_t>(n) * n, 0.0);
  for (int i = 0; i < n; ++i) {
    for (int k = 0; k < n; ++k) {
      const double aik = pa[i * n + k];
      for (int j = 0; j < n; ++j) ref[i * n + j] += aik * pb[k * n + j];
    }
  }
  double max_ref = 0, max_err = 0;
  for (size_t i = 0; i < ref.size(); ++i) {
    max_ref = std::max(max_ref, std::abs(ref[i]));
    max_err = std::max(max_err, std::abs(ref[i] - static_cast<double>(pc[i])));
  }
  return max_ref > 0 ? max_err / max_ref : max_err;
}

v1::Calibration Calibrate(const BlasCheck& blas, int gemm_size, int repeats) {
  const int64_t start = SteadyNowNs();
  torch::NoGradGuard no_grad;
  v1::Calibration cal;
  cal.set_blas(DescribeBlas());
  cal.set_blas_check(blas.text);
  cal.set_blas_below(blas.below);
  cal.set_sgemm_relative_error(blas.sgemm_relative_error);
  cal.set_gemm_size(gemm_size);
  {
    auto gen = at::make_generator<at::CPUGeneratorImpl>(1);
    torch::Tensor a = torch::rand({gemm_size, gemm_size}, gen);
    torch::Tensor b = torch::rand({gemm_size, gemm_size}, gen);
    torch::Tensor c = torch::mm(a, b);  // warm-up: threads, pages
    int64_t best = INT64_MAX;
    for (int r = 0; r < repeats; ++r) {
      const int64_t t0 = SteadyNowNs();
      torch::mm_out(c, a, b);
      best = std::min(best, SteadyNowNs() - t0);
    }
    const double flops = 2.0 * gemm_size * static_cast<double>(gemm_size) * gemm_size;
    cal.set_gemm_gflops(flops / static_cast<double>(best));
  }
  {
    constexpr int64_t kFloats = int64_t{64} << 20;  // 256 MiB
    torch::Tensor src = torch::ones({kFloats});
    torch::Tensor dst = torch::empty({kFloats});
    dst.copy_(src);
    int64_t best = INT64_MAX;
    for (int r = 0; r < repeats; ++r) {
      const int64_t t0 = SteadyNowNs();
      dst.copy_(src);
      best = std::min(best, SteadyNowNs() - t0);
    }
    cal.set_memory_gbytes_per_second(2.0 * kFloats * 4 / static_cast<double>(best));
  }
  cal.set_seconds(static_cast<double>(SteadyNowNs() - start) * 1e-9);
  return cal;
}

}  // namespace hetbench::agent
