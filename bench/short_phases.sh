#!/usr/bin/env bash
# How often are short phases INVALID for two agent builds, run side by side
# so that each loads the machine for the other (as two jobs, or two CI tests,
# at once)? Each round starts two coordinators on loopback, each with one
# agent (1 LibTorch thread), one agent of build A and one of build B, and
# submits JOBS jobs of e2e.repeats' "spread" shape to both at once (mlp,
# batch 32, 40 training steps after 2 warm-up steps, 6 inference batches
# after 2 warm-up batches, 2 runs a job); it counts the runs whose training
# and inference phases came back INVALID, and the reasons. Prints per round
# and RESULT lines with the totals; asserts nothing.
# Usage: bench/short_phases.sh SERVER CLI AGENT_A AGENT_B [ROUNDS=3] [JOBS=10]
# Loopback only; every process is stopped when the script ends.
set -euo pipefail
SERVER=$1 CLI=$2 AGENT_A=$3 AGENT_B=$4 ROUNDS=${5:-3} JOBS=${6:-10}
# shellcheck source=../tests/e2e/lib.sh
source "$(dirname "$0")/../tests/e2e/lib.sh"  # e2e_begin, wait_for, agent_connected, cpu_model
e2e_begin short-phases  # WORK (kept unless the bench finishes), PIDS stopped on exit
shape=(-m mlp -b 32 --min-steps 40 --max-steps 40 --warmup-steps 2 --infer-max-batches 6 --min-duration 0 --repeats 2)
echo "cpu: $(cpu_model)"
echo "A: $AGENT_A"
echo "B: $AGENT_B"

# side NAME AGENT PORT: a coordinator and its agent, ready.
side() {
  local name=$1 agent=$2 port=$3
  mkdir -p "$WORK/$name"
  "$SERVER" --listen "127.0.0.1:$port" --metrics-listen "" --db "$WORK/$name/jobs.db" >>"$WORK/$name/server.log" 2>&1 &
  PIDS+=($!)
  HETBENCH_SERVER=127.0.0.1:$port wait_for 20 "$CLI" health || { echo "$name: the coordinator did not start" >&2; exit 1; }
  "$agent" --server "127.0.0.1:$port" --agent-id "$name" --threads 1 --qpu-sim off --python-runner off \
    --calibration off >>"$WORK/$name/agent.log" 2>&1 &
  PIDS+=($!)
  HETBENCH_SERVER=127.0.0.1:$port wait_for 60 agent_connected "$CLI" "$name" ||
    { echo "$name: the agent did not connect" >&2; exit 1; }
}
ended() {
  HETBENCH_SERVER=127.0.0.1:$1 "$CLI" get jobs --limit 0 -o json >"$WORK/jobs.$1.json" 2>/dev/null &&
    [[ $(jq '[.jobs[] | select(.state != "JOB_STATE_SUCCEEDED" and .state != "JOB_STATE_FAILED")] | length' \
      "$WORK/jobs.$1.json") == 0 ]]
}
# count PORT PHASE: "invalid/runs" over every job's runs.
count() {
  local ids
  ids=$(jq -r '.jobs[].id' "$WORK/jobs.$1.json")
  for id in $ids; do HETBENCH_SERVER=127.0.0.1:$1 "$CLI" get job "$id" -o json; done |
    jq -s -r --arg p "$2" '[.[].tasks[].result.phases[]? | select(.phase == $p)] |
      "\([.[] | select((.valid // false) | not)] | length)/\(length)"'
}
reasons() {
  local ids
  ids=$(jq -r '.jobs[].id' "$WORK/jobs.$1.json")
  for id in $ids; do HETBENCH_SERVER=127.0.0.1:$1 "$CLI" get job "$id" -o json; done |
    jq -s -r '[.[].tasks[].result.phases[]? | select((.valid // false) | not) |
      "\(.phase | ascii_downcase | ltrimstr("phase_")) \((.invalid_reasons[0] // "") |
        (capture("IQR/median = (?<v>[0-9.]+)").v // .[0:40]))"] | sort | join(", ")'
}

declare -A total_invalid total_runs
for key in a_train a_infer b_train b_infer; do total_invalid[$key]=0 total_runs[$key]=0; done
for ((round = 1; round <= ROUNDS; round++)); do
  pa=$(ports_below_ephemeral 10000 2 20000) pb=$((pa + 1))
  side a "$AGENT_A" "$pa"
  side b "$AGENT_B" "$pb"
  for ((j = 0; j < JOBS; j++)); do
    HETBENCH_SERVER=127.0.0.1:$pa "$CLI" submit "${shape[@]}" --name short >/dev/null
    HETBENCH_SERVER=127.0.0.1:$pb "$CLI" submit "${shape[@]}" --name short >/dev/null
  done
  deadline=$((SECONDS + 300))
  until ended "$pa" && ended "$pb"; do  # every 0.5 s, not wait_for's 0.1 s: the polls load the machine measured
    ((SECONDS < deadline)) || { echo "round $round: the jobs did not end in 300 s" >&2; exit 1; }
    sleep 0.5
  done
  line="round $round:"
  for s in a b; do
    port=$pa
    [[ $s == b ]] && port=$pb
    for phase in train infer; do
      c=$(count "$port" "PHASE_${phase^^}")
      total_invalid[${s}_$phase]=$((total_invalid[${s}_$phase] + ${c%/*}))
      total_runs[${s}_$phase]=$((total_runs[${s}_$phase] + ${c#*/}))
      line+=" ${s}_${phase}_invalid=$c"
    done
    why=$(reasons "$port")
    [[ -z $why ]] || line+=" ($s, IQR/median of the INVALID: $why)"
  done
  echo "$line"
  for p in "${PIDS[@]}"; do kill -9 "$p" 2>/dev/null || true; done
  { wait; } 2>/dev/null || true
  PIDS=()
  rm -rf "$WORK/a" "$WORK/b"
done
for s in a b; do
  echo "RESULT_${s^^} train_invalid=${total_invalid[${s}_train]}/${total_runs[${s}_train]}" \
    "infer_invalid=${total_invalid[${s}_infer]}/${total_runs[${s}_infer]}"
done
ok=1
