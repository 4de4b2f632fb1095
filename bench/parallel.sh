#!/usr/bin/env bash
# Many devices on one VM, with the real binaries on loopback:
#  1. data-parallel scaling of mlp over 1, 2 and 4 CPU ranks (4 agents of one
#     device each, 1 LibTorch thread per rank), c10d/Gloo all-reduce;
#  2. split execution: mlp in two stages on one agent's CPU, and qnn's
#     classical layers on the CPU with its quantum layer on the qpu-sim;
#  3. splits across agents: mlp (0-2 | 3-) and cnn (0-7 | 8-) with a stage
#     on each of two agents (c10d send/recv over loopback), each against the
#     same model on one device.
# Prints `hetbench report`'s scaling and split tables. The VM has 2 cores: 4
# ranks share them, so the figures show the all-reduce's cost and the
# contention, not the speed-up 4 real devices would give.
# Usage: bench/parallel.sh SERVER AGENT CLI [STEPS=300]
set -euo pipefail
SERVER=$1 AGENT=$2 CLI=$3 STEPS=${4:-300}
WORK=$(mktemp -d /tmp/hetbench-parallel.XXXXXX)
PIDS=()
trap 'for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done; wait 2>/dev/null || true' EXIT
# shellcheck source=../tests/e2e/lib.sh
source "$(dirname "$0")/../tests/e2e/lib.sh"  # ports_below_ephemeral
PORT=$(ports_below_ephemeral 10000 1 20000)
export HETBENCH_SERVER=127.0.0.1:$PORT
"$SERVER" --listen "127.0.0.1:$PORT" --metrics-listen "" --db "$WORK/jobs.db" >"$WORK/server.log" 2>&1 &
PIDS+=($!)
for _ in $(seq 100); do "$CLI" health >/dev/null 2>&1 && break; sleep 0.1; done
BASE=$(ports_below_ephemeral 20000 42)
for i in 1 2 3 4; do
  qpu=off
  [[ $i == 1 ]] && qpu=on
  "$AGENT" --agent-id "a$i" --threads 1 --qpu-sim $qpu --python-runner off --calibration off \
    --rendezvous-port-base $((BASE + 10 * i)) >"$WORK/agent-$i.log" 2>&1 &
  PIDS+=($!)
done
for _ in $(seq 300); do
  [[ $("$CLI" get agents -o json 2>/dev/null | jq '.agents | length') == 4 ]] && break
  sleep 0.1
done
echo "== data-parallel mlp, batch 64 per rank, $STEPS measured steps, 1 thread per rank"
"$CLI" submit -m mlp -b 64 --parallel 1,2,4 --warmup-steps 10 --min-steps "$STEPS" --min-duration 0 \
  --infer-max-batches 1 --name scaling --wait --wait-timeout 900 >/dev/null || true
"$CLI" report job-000001 | sed -n '/^data-parallel scaling/,/^EFFICIENCY/p'
echo
echo "== split: mlp 0-3 | 4-6 on one agent's cpu0; qnn on cpu | qpu-sim | cpu; and qnn on one device"
"$CLI" submit -m mlp -b 64 --split 0-3:cpu,4-:cpu --warmup-steps 10 --min-steps "$STEPS" --min-duration 0 \
  --infer-max-batches 1 --target cpu --wait --wait-timeout 900 >/dev/null || true
"$CLI" submit -m qnn -b 64 --split 0:cpu,1:qpu-sim,2:cpu --warmup-steps 5 --min-steps 50 --min-duration 0 \
  --infer-max-batches 1 --target cpu --wait --wait-timeout 900 >/dev/null || true
"$CLI" submit -m qnn -b 64 --warmup-steps 5 --min-steps 50 --min-duration 0 --infer-max-batches 1 --target cpu \
  --wait --wait-timeout 900 >/dev/null || true
for j in 2 3; do "$CLI" report job-00000$j | sed -n '/^split stages/,/^TRANSFER:/p'; done
"$CLI" report job-000004 | grep -E "^TASK|train" | head -3
echo
echo "== split across agents: a stage on each of two agents; the same model on one device"
job=5
for case in "mlp 0-2:cpu,3-:cpu $STEPS" "cnn 0-7:cpu,8-:cpu $((STEPS / 5))"; do
  read -r model split steps <<<"$case"
  "$CLI" submit -m "$model" -b 64 --split "$split" --split-across-agents --warmup-steps 5 --min-steps "$steps" \
    --min-duration 0 --wait --wait-timeout 900 >/dev/null || true
  "$CLI" report "job-00000$job" | sed -n '/^split stages/,/^TRANSFER:/p' | grep -v '^TRANSFER:'
  "$CLI" submit -m "$model" -b 64 --warmup-steps 5 --min-steps "$steps" --min-duration 0 --infer-max-batches 1 \
    --target cpu --wait --wait-timeout 900 >/dev/null || true
  "$CLI" report "job-00000$((job + 1))" | grep -E " train " | head -1
  job=$((job + 2))
done
echo "logs: $WORK"
