#include "agent/node/blas_settle.h"

#include <unistd.h>

#include <cstdlib>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "common/log.h"

namespace hetbench::agent {

namespace {

// OpenBLAS 0.3.21 does not recognise some current CPUs and falls back to a
// lesser kernel family (generic 'Prescott' kernels were measured ~5x slower
// for SGEMM on this project's VM). The family can only be chosen before the
// library loads, so when the loaded family is below what the CPU's flags
// support, the agent re-executes itself with OPENBLAS_CORETYPE set, checks
// the new kernels' SGEMM against a float64 reference, and keeps them only if
// they are right (else it re-executes with the original setting and flags
// every CPU result). HETBENCH_BLAS_FIX carries the state across the exec.
constexpr char kFixVar[] = "HETBENCH_BLAS_FIX";
constexpr double kMaxSgemmError = 1e-4;

}  // namespace

BlasCheck SettleOpenBlasKernel(const std::string& mode, const v1::Device& cpu, char** argv) {
  const std::string core = OpenBlasCoreName();
  const std::vector<std::string> flags(cpu.isa_flags().begin(), cpu.isa_flags().end());
  const BlasKernelVerdict verdict = CheckBlasKernel(core, flags);
  const char* fix_env = getenv(kFixVar);
  const std::string fix = fix_env ? fix_env : "";
  unsetenv(kFixVar);
  if (absl::StartsWith(fix, "trying:")) {  // "trying:<original OPENBLAS_CORETYPE or ->:<original family>"
    std::vector<std::string> parts = absl::StrSplit(fix, absl::MaxSplits(':', 2));
    const std::string original_env = parts.size() > 1 ? parts[1] : "-";
    const std::string original_core = parts.size() > 2 ? parts[2] : "?";
    const double err = SgemmRelativeError(256, 7);
    if (err <= kMaxSgemmError && !verdict.below) {
      return {absl::StrFormat("fixed: OpenBLAS chose %s kernels; restarted with OPENBLAS_CORETYPE=%s (%s); "
                              "SGEMM 256^3 matches a float64 reference (max rel. error %.1e)",
                              original_core, core, verdict.text, err),
              false, err};
    }
    LogWarning("agent", "OpenBLAS ", core, " kernels failed the check (SGEMM rel. error ", err,
                         "); going back to ", original_core);
    if (original_env == "-") {
      unsetenv("OPENBLAS_CORETYPE");
    } else {
      setenv("OPENBLAS_CORETYPE", original_env.c_str(), 1);
    }
    setenv(kFixVar, absl::StrFormat("rejected:%s kernels gave SGEMM rel. error %.1e", core, err).c_str(), 1);
    execv("/proc/self/exe", argv);
    return {absl::StrCat(verdict.text, "; re-exec failed"), true, err};
  }
  if (absl::StartsWith(fix, "rejected:")) {
    return {absl::StrCat("MISMATCH: ", verdict.text, "; the better kernels were rejected (", fix.substr(9),
                         "): CPU results are flagged"),
            verdict.below, 0};
  }
  if (!verdict.below) return {verdict.text, false, 0};
  if (mode == "keep") {
    return {absl::StrCat("MISMATCH: ", verdict.text, " (kept by --blas-coretype=keep): CPU results are flagged"), true,
            0};
  }
  const char* original = getenv("OPENBLAS_CORETYPE");
  LogInfo("agent", verdict.text, "; restarting with OPENBLAS_CORETYPE=", verdict.better_core,
                    " (keep them with --blas-coretype=keep)");
  setenv(kFixVar, absl::StrCat("trying:", original ? original : "-", ":", core).c_str(), 1);
  setenv("OPENBLAS_CORETYPE", verdict.better_core.c_str(), 1);
  execv("/proc/self/exe", argv);
  LogWarning("agent", "re-exec failed; continuing with ", core, " kernels");
  return {absl::StrCat("MISMATCH: ", verdict.text, "; re-exec failed: CPU results are flagged"), true, 0};
}


}  // namespace hetbench::agent
