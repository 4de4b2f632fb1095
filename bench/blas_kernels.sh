#!/usr/bin/env bash
# Calibration under OpenBLAS kernel choices, in one run: the generic fallback
# (Prescott) kept, SkylakeX set by hand, and the agent's own fix starting from
# the fallback. Prints each SGEMM rate and the ratio fix / by-hand (goal >= 0.8).
# usage: blas_kernels.sh AGENT_BINARY [GEMM_SIZE]
set -euo pipefail
AGENT=$1
N=${2:-2048}
run() {  # label, OPENBLAS_CORETYPE or "", --blas-coretype mode
  local out
  if [[ -n "$2" ]]; then
    out=$(env OPENBLAS_CORETYPE="$2" "$AGENT" --calibrate --blas-coretype "$3" --calibration-gemm-size "$N" 2>/dev/null)
  else
    out=$(env -u OPENBLAS_CORETYPE "$AGENT" --calibrate --blas-coretype "$3" --calibration-gemm-size "$N" 2>/dev/null)
  fi
  local gflops kernel check
  gflops=$(jq -r '.gemm_gflops' <<<"$out")
  kernel=$(jq -r '.blas' <<<"$out" | sed -n 's/.*(kernels: \(.*\))$/\1/p')
  check=$(jq -r '.blas_check' <<<"$out")
  printf '%-34s %9.1f GFLOP/s  kernels %-11s %s\n' "$1" "$gflops" "$kernel" "$check" >&2
  echo "$gflops"
}
echo "SGEMM ${N}^3, $(nproc) threads" >&2
fallback=$(run "fallback kept (Prescott, keep)" Prescott keep)
by_hand=$(run "SkylakeX by hand (keep)" SkylakeX keep)
fixed=$(run "agent fix from Prescott (auto)" Prescott auto)
default=$(run "no OPENBLAS_CORETYPE (auto)" "" auto)
awk -v f="$fixed" -v h="$by_hand" -v p="$fallback" -v d="$default" 'BEGIN {
  printf "fix / by hand = %.3f (goal >= 0.8); fix / fallback = %.2fx; default / by hand = %.3f\n", f / h, f / p, d / h }' >&2
