#!/usr/bin/env bash
# How often `advise --verify` lands inside its own prediction interval, with the real binaries on
# loopback: two CPU agents (1 LibTorch thread each), an mlp split across them whose probes give the
# link (--link-from), cnn profiled per layer with --repeats R, then the plan 0-7:cpu,8-:cpu across
# the agents predicted once and verified N times (each verification a new split job of STEPS steps).
# Prints every verification line and "within the interval: K of N", with the CPU it ran on.
# Bounded: the processes it starts are stopped on exit (logs kept in /tmp/hetbench-advise-bench.* if it
# stops early).
# Usage: bench/advise_verify.sh SERVER AGENT CLI [N=6] [REPEATS=3] [STEPS=30]
set -euo pipefail
SERVER=$1 AGENT=$2 CLI=$3 N=${4:-6} REPEATS=${5:-3} STEPS=${6:-30}
# shellcheck source=../tests/e2e/lib.sh
source "$(dirname "$0")/../tests/e2e/lib.sh"  # e2e_begin, start_coordinator, wait_for, agent_connected
e2e_begin advise-bench  # WORK (kept unless the bench finishes), PIDS stopped on exit
start_coordinator "$SERVER" "$CLI"
BASE=$((41000 + RANDOM % 20000))
for i in 1 2; do
  "$AGENT" --agent-id "adv$i" --threads 1 --qpu-sim off --python-runner off --calibration off \
    --rendezvous-port-base $((BASE + 100 * i)) >"$WORK/agent-$i.log" 2>&1 &
  PIDS+=($!)
  wait_for 60 agent_connected "$CLI" "adv$i" || fail "agent adv$i did not connect"
done
run() {  # run SUBMIT_FLAGS...: submits, waits, prints the job id; stops the bench if the job failed
  local id
  id=$("$CLI" submit "$@")
  "$CLI" watch "$id" >/dev/null 2>&1 || true
  [[ $("$CLI" get job "$id" -o json | jq -r '.state') == JOB_STATE_SUCCEEDED ]] || {
    echo "advise_verify: $id ($*) did not succeed; logs in $WORK" >&2
    exit 1
  }
  echo "$id"
}
echo "cpu: $(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | head -n 1), $(nproc) cores"
link=$(run -m mlp -b 64 --split 0-2:cpu,3-:cpu --split-across-agents --warmup-steps 5 --min-steps 100 \
  --min-duration 0)
timed=$(run -m cnn -b 64 -t cpu --layers --layer-steps 5 --warmup-steps 5 --min-steps "$STEPS" \
  --min-duration 0 --infer-max-batches 1 --repeats "$REPEATS")
ADVISE=("$CLI" advise "$timed" --plan 0-7:cpu,8-:cpu --across-agents --link-from "$link")
"${ADVISE[@]}" -o json >"$WORK/plan.json"
jq -r 'def r: . * 10 | round / 10;
       "advice from \(.runs) runs of '"$timed"': predicted \(.best.step_ms | r) ms, 95% interval " +
       "\(.prediction_interval_ms | map(r) | join("-")) ms",
       "link: \(.link_source)"' "$WORK/plan.json"
within=0
for i in $(seq "$N"); do
  "${ADVISE[@]}" --verify --verify-steps "$STEPS" >"$WORK/verify-$i.out" 2>"$WORK/verify-$i.err" || {
    echo "advise_verify: verification $i failed: $(tail -n 2 "$WORK/verify-$i.err")" >&2
    exit 1
  }
  echo "verification $i: $(tr '\n' ' ' <"$WORK/verify-$i.out")"
  if grep -q "^measured within the 95% prediction interval" "$WORK/verify-$i.out"; then within=$((within + 1)); fi
done
ok=1
echo "within the interval: $within of $N (cnn 0-7:cpu,8-:cpu across two agents, $REPEATS profile runs)"
