#!/usr/bin/env bash
# How often `advise --verify` lands inside its own prediction interval, with the real binaries on
# loopback: two CPU agents (1 LibTorch thread each), an mlp split across them whose probes give the
# link (--link-from, REPEATS runs of it, so the interval holds the link's variation between runs),
# cnn profiled per layer with repeats REPEATS on each of the PROFILE_AGENTS agents the split runs on
# (2: one target pinned to each agent, their runs interleaved A B A B, so the profile holds both
# agents and twice the time, one task at a time unless ONE_AT_A_TIME=0 (side by side, the two
# agents share this host's caches and memory); 1: on any one agent, back to back), then the plan
# 0-7:cpu,8-:cpu across the agents predicted once and verified N times (each verification a new
# split job of STEPS steps). Prints every verification line with the measured parts (the stages'
# compute, the link, the rest) and "within the interval: K of N", with the CPU it ran on, and
# beside it how many fell within the interval of the profile's runs alone (without the link's).
# Bounded: the processes it starts are stopped on exit (logs kept in /tmp/hetbench-advise-bench.* if it
# stops early).
# Usage: bench/advise_verify.sh SERVER AGENT CLI [N=6] [REPEATS=3] [STEPS=30] [PROFILE_AGENTS=2]
#        [ONE_AT_A_TIME=1]
set -euo pipefail
SERVER=$1 AGENT=$2 CLI=$3 N=${4:-6} REPEATS=${5:-3} STEPS=${6:-30} PROFILE_AGENTS=${7:-2} ONE_AT_A_TIME=${8:-1}
# shellcheck source=../tests/e2e/lib.sh
source "$(dirname "$0")/../tests/e2e/lib.sh"  # e2e_begin, start_coordinator, wait_for, agent_connected
e2e_begin advise-bench  # WORK (kept unless the bench finishes), PIDS stopped on exit
start_coordinator "$SERVER" "$CLI"
BASE=$(ports_below_ephemeral 20000 102)
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
echo "cpu: $(cpu_model), $(nproc) cores"
link=$(run -m mlp -b 64 --split 0-2:cpu,3-:cpu --split-across-agents --warmup-steps 5 --min-steps 100 \
  --min-duration 0 --repeats "$REPEATS")
if [[ $PROFILE_AGENTS == 2 ]]; then
  cat >"$WORK/profile.yaml" <<YAML
models: [cnn]
batch_sizes: [64]
targets:
  - {device_kind: cpu, agent_id: adv1}
  - {device_kind: cpu, agent_id: adv2}
train: {warmup_steps: 5, min_steps: $STEPS, min_duration_seconds: 0}
inference: {max_batches: 1}
layers: {enabled: true, steps: 5}
repeats: $REPEATS
one_at_a_time: $([[ $ONE_AT_A_TIME == 1 ]] && echo true || echo false)
YAML
  timed=$(run -f "$WORK/profile.yaml")
else
  timed=$(run -m cnn -b 64 -t cpu --layers --layer-steps 5 --warmup-steps 5 --min-steps "$STEPS" \
    --min-duration 0 --infer-max-batches 1 --repeats "$REPEATS")
fi
ADVISE=("$CLI" advise "$timed" --plan 0-7:cpu,8-:cpu --across-agents --link-from "$link")
"${ADVISE[@]}" -o json >"$WORK/plan.json"
jq -r 'def r: . * 10 | round / 10;
       "advice from \(.runs) runs of '"$timed"': predicted \(.best.step_ms | r) ms, 95% interval " +
       "\(.prediction_interval_ms | map(r) | join("-")) ms",
       "link: \(.link_source), from \(.link_runs) run(s) (in the interval: \(.interval_has_link); " +
       "the profile'"'"'s runs alone: \(.profile_interval_ms // [] | map(r) | join("-")) ms)",
       "predicted parts: compute \(.best.step_ms - .best.transfer_ms - .best.optimizer_ms | r) ms, link " +
       "\(.best.transfer_ms | r) ms, optimizer \(.best.optimizer_ms | r) ms"' "$WORK/plan.json"
within=0 within_profile=0
read -r plo phi < <(jq -r '(.profile_interval_ms // [0, 0]) | map(. * 1e6) | "\(.[0]) \(.[1])"' "$WORK/plan.json")
for i in $(seq "$N"); do
  "${ADVISE[@]}" --verify --verify-steps "$STEPS" >"$WORK/verify-$i.out" 2>"$WORK/verify-$i.err" || {
    echo "advise_verify: verification $i failed: $(tail -n 2 "$WORK/verify-$i.err")" >&2
    exit 1
  }
  echo "verification $i: $(tr '\n' ' ' <"$WORK/verify-$i.out")"
  verify_job=$(grep -o 'job-[0-9]*' "$WORK/verify-$i.out" | head -n 1)
  # The split's parts (result.split medians): both stages' compute, the link (both ways), the rest.
  "$CLI" get job "$verify_job" -o json >"$WORK/verify-$i.json"
  jq -r 'def r: . * 100 | round / 100;
    .tasks[0].result.split as $s | ($s | map(.forward_ns + .backward_ns) | add) as $c |
    "  measured parts: compute \($c / 1e6 | r) ms, link \($s[0].transfer_ns / 1e6 | r) ms, rest " +
    "\(($s[0].step_ns - $c - $s[0].transfer_ns) / 1e6 | r) ms"' "$WORK/verify-$i.json"
  if grep -q "^measured within the 95% prediction interval" "$WORK/verify-$i.out"; then within=$((within + 1)); fi
  measured=$(jq -r '.tasks[0].result.phases[] | select(.phase == "PHASE_TRAIN") | .stats.p50_ns' "$WORK/verify-$i.json")
  if jq -en --argjson m "$measured" --argjson lo "$plo" --argjson hi "$phi" '$m >= $lo and $m <= $hi' >/dev/null; then
    within_profile=$((within_profile + 1))
  fi
done
ok=1
echo "within the interval: $within of $N (the profile's runs alone: $within_profile of $N) (cnn 0-7:cpu,8-:cpu across two agents, $REPEATS profile runs on $PROFILE_AGENTS agent(s), one at a time: $ONE_AT_A_TIME)"
