#!/usr/bin/env bash
# The real agent binary against OpenBLAS's generic fallback: started with
# OPENBLAS_CORETYPE=Prescott on a CPU with AVX2 or AVX-512, it must re-execute
# itself with better kernels, pass the float64 SGEMM check and say so; with
# --blas-coretype=keep it must keep Prescott and flag the CPU (blas_below).
set -euo pipefail
AGENT=$1
fail() { echo "blas_fix FAILED: $*"; exit 1; }
command -v jq >/dev/null || fail "jq is missing (scripts/install-deps installs it)"
if ! grep -qw avx2 /proc/cpuinfo; then
  echo "blas_fix: this CPU has no AVX2, so Prescott-class kernels are not below it; checking 'keep' only"
fi

fixed=$(OPENBLAS_CORETYPE=Prescott "$AGENT" --calibrate --calibration-gemm-size 128 2>/dev/null) ||
  fail "agent --calibrate exited non-zero"
kept=$(OPENBLAS_CORETYPE=Prescott "$AGENT" --calibrate --blas-coretype keep --calibration-gemm-size 128 2>/dev/null) ||
  fail "agent --calibrate --blas-coretype keep exited non-zero"
echo "auto: $(jq -r .blas_check <<<"$fixed")"
echo "keep: $(jq -r .blas_check <<<"$kept")"

[[ $(jq -r .gemm_gflops <<<"$fixed") != 0 ]] || fail "no GEMM rate"
if grep -qw avx2 /proc/cpuinfo; then
  [[ $(jq -r .blas <<<"$fixed") != *"kernels: Prescott"* ]] || fail "auto kept the Prescott kernels"
  [[ $(jq -r .blas_check <<<"$fixed") == fixed:* ]] || fail "auto did not report the fix"
  [[ $(jq -r .blas_below <<<"$fixed") == false ]] || fail "a fixed CPU is flagged"
  err=$(jq -r .sgemm_relative_error <<<"$fixed")
  awk -v e="$err" 'BEGIN { exit !(e > 0 && e < 1e-4) }' || fail "SGEMM check error $err not in (0, 1e-4)"
  [[ $(jq -r .blas <<<"$kept") == *"kernels: Prescott"* ]] || fail "keep changed the kernels"
  [[ $(jq -r .blas_below <<<"$kept") == true ]] || fail "keep did not flag the CPU"
  [[ $(jq -r .blas_check <<<"$kept") == MISMATCH:* ]] || fail "keep did not name the mismatch"
fi
echo "blas_fix: ok"
