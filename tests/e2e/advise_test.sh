#!/usr/bin/env bash
# `hetbench advise --verify` with the real binaries on loopback: a qnn job
# timed per layer on cpu and qpu-sim, the advisor's plan (-o json and the
# table), and --verify, which submits the advised split, waits for it and
# prints predicted against measured. Then mlp and cnn over two CPU agents:
# a plan given with --plan --across-agents, the link measured by an mlp
# split across the agents (--link-from), verified as a split across agents;
# cnn profiled with --repeats 3, its runs one after another though both agents are free.
# The errors are printed, not judged: a timing threshold would make the test
# depend on the machine's load.
# Usage: advise_test.sh SERVER AGENT CLI
set -euo pipefail
SERVER=$1 AGENT=$2 CLI=$3
# shellcheck source=lib.sh
source "$(dirname "$0")/lib.sh"
e2e_begin "advise"
start_coordinator "$SERVER" "$CLI"
BASE=$(ports_below_ephemeral 20000 102)
"$AGENT" --agent-id adv --threads 1 --python-runner off --calibration off --rendezvous-port-base "$BASE" \
  >>"$WORK/agent.log" 2>&1 &
PIDS+=($!)
wait_for 60 agent_connected "$CLI" adv || fail "agent did not connect"

"$CLI" submit -m qnn -b 64 -t cpu -t qpu-sim --layers --layer-steps 10 --warmup-steps 5 --min-steps 60 \
  --min-duration 0 --infer-max-batches 1 --wait >"$WORK/submit.out" 2>&1 || fail "the timed job failed: $(tail -3 "$WORK/submit.out")"

"$CLI" advise job-000001 -o json >"$WORK/advice.json" || fail "advise -o json failed"
flag=$(jq -r '.best.split_flag' "$WORK/advice.json")
[[ $flag =~ ^[0-9] ]] || fail "no split flag in the advice: $flag"
[[ $(jq -r '.single_devices | length' "$WORK/advice.json") == 2 ]] || fail "the advice does not list both single-device runs"
[[ $(jq -r '.assumptions | length' "$WORK/advice.json") -ge 3 ]] || fail "the advice states no assumptions"

"$CLI" advise job-000001 --verify --verify-steps 60 >"$WORK/verify.out" 2>"$WORK/verify.err" \
  || fail "advise --verify failed: $(tail -3 "$WORK/verify.err")"
line=$(cat "$WORK/verify.out")
[[ $line =~ ^advised\ ([^ ]+):\ predicted\ step\ ([0-9.]+)\ ms,\ measured\ ([0-9.]+)\ ms\ \((job-[0-9]+),\ p50\ of\ 60\ steps\):\ ([-+][0-9.]+)% ]] \
  || fail "unexpected --verify output: $line"
[[ ${BASH_REMATCH[1]} == "$flag" ]] || fail "--verify ran ${BASH_REMATCH[1]}, the advice was $flag"
verify_job=${BASH_REMATCH[4]}
"$CLI" get job "$verify_job" -o json >"$WORK/verify.json"
[[ $(jq -r '.state' "$WORK/verify.json") == JOB_STATE_SUCCEEDED ]] || fail "$verify_job did not succeed"
stages=$(awk -F, '{print NF}' <<<"$flag")
if (( stages > 1 )); then
  [[ $(jq -r '.tasks[0].result.split | length' "$WORK/verify.json") == "$stages" ]] \
    || fail "$verify_job did not run the $stages stages of $flag"
fi
echo "advise: $line"

# ---- two CPU agents: a given plan across them, predicted and verified
"$AGENT" --agent-id adv2 --threads 1 --qpu-sim off --python-runner off --calibration off \
  --rendezvous-port-base $((BASE + 100)) >>"$WORK/agent2.log" 2>&1 &
PIDS+=($!)
wait_for 60 agent_connected "$CLI" adv2 || fail "the second agent did not connect"
submitted() {  # submitted SUBMIT_FLAGS...: submits, waits for the end, prints the job id
  local id
  id=$("$CLI" submit "$@") || fail "submit $* failed"
  "$CLI" watch "$id" >/dev/null 2>&1 || true
  echo "$id"
}
link_job=$(submitted -m mlp -b 64 --split 0-2:cpu,3-:cpu --split-across-agents --warmup-steps 5 --min-steps 100 \
  --min-duration 0)
[[ $("$CLI" get job "$link_job" -o json | jq -r '.state') == JOB_STATE_SUCCEEDED ]] || fail "the link job $link_job failed"
# Each stage's rank read the machine probe before training, in turn, and none after (a gang's ranks).
"$CLI" get job "$link_job" -o json | jq -e '[.tasks[].result.machine_probe] | length == 2 and
  all(((.before_ns // "0") | tonumber) > 0 and ((.after_ns // "0") | tonumber) == 0)' >/dev/null ||
  fail "the split's ranks carry no machine probe before training: $("$CLI" get job "$link_job" -o json |
    jq -c '[.tasks[].result.machine_probe]')"
# cnn is profiled 3 times (--repeats 3), one run after another: the advice is the median of the runs, with a
# prediction interval.
for case in "mlp 0-2:cpu,3-:cpu 100 1" "cnn 0-7:cpu,8-:cpu 30 3"; do
  read -r model plan steps repeats <<<"$case"
  timed=$(submitted -m "$model" -b 64 -t cpu --layers --layer-steps 5 --warmup-steps 5 --min-steps "$steps" \
    --min-duration 0 --infer-max-batches 1 --repeats "$repeats")
  if ((repeats > 1)); then
    # Two agents were free, yet the runs of the one configuration ran one after another.
    "$CLI" get job "$timed" -o json >"$WORK/timed.json"
    jq -e '[.tasks[] | [.started_unix_seconds, .finished_unix_seconds]] as $w | ($w | length) == 3 and
      all(range(1; $w | length); $w[.][0] >= $w[. - 1][1])' "$WORK/timed.json" >/dev/null ||
      fail "the runs of $timed overlapped: $(jq -c '[.tasks[] | [.agent_id, .started_unix_seconds, .finished_unix_seconds]]' "$WORK/timed.json")"
  fi
  "$CLI" advise "$timed" --plan "$plan" --across-agents --link-from "$link_job" -o json >"$WORK/plan.json" \
    || fail "advise --plan for $model failed"
  [[ $(jq -r '.plan_given and .across_agents' "$WORK/plan.json") == true ]] || fail "the advice does not say the plan was given"
  # The link job's split probed its link (latency and bandwidth), which scales to this boundary's size.
  [[ $(jq -r '.link_source' "$WORK/plan.json") == "probed by $link_job's split tasks across agents: "* ]] \
    || fail "the link is not $link_job's probe: $(jq -r '.link_source' "$WORK/plan.json")"
  jq -e '.link_latency_us > 0 and .link_gbytes_per_second > 0' "$WORK/plan.json" >/dev/null \
    || fail "no probed latency and bandwidth: $(jq -c '[.link_latency_us, .link_gbytes_per_second]' "$WORK/plan.json")"
  [[ $(jq -r '.runs' "$WORK/plan.json") == "$repeats" ]] || fail "the advice is not over $repeats runs"
  if ((repeats > 1)); then
    jq -e '(.prediction_interval_ms | length) == 2 and .prediction_interval_ms[0] <= .best.step_ms and
      .best.step_ms <= .prediction_interval_ms[1]' "$WORK/plan.json" >/dev/null ||
      fail "no prediction interval around the step from $repeats runs: $(jq -c '[.prediction_interval_ms, .best.step_ms]' "$WORK/plan.json")"
  fi
  "$CLI" advise "$timed" --plan "$plan" --across-agents --link-from "$link_job" --verify --verify-steps "$steps" \
    >"$WORK/verify.out" 2>"$WORK/verify.err" || fail "advise --verify for $model failed: $(tail -3 "$WORK/verify.err")"
  line=$(cat "$WORK/verify.out")
  [[ $line =~ ^plan\ ${plan}\ across\ agents:\ predicted\ step\ [0-9.]+\ ms,\ measured\ [0-9.]+\ ms\ \((job-[0-9]+), ]] \
    || fail "unexpected --verify output for $model: $line"
  "$CLI" get job "${BASH_REMATCH[1]}" -o json >"$WORK/verify.json"
  [[ $(jq -r '.tasks | map(.agent_id) | unique | length' "$WORK/verify.json") == 2 ]] \
    || fail "the verification of $model did not run on both agents"
  if ((repeats > 1)); then
    grep -qE "^measured (within|OUTSIDE) the 95% prediction interval" "$WORK/verify.out" ||
      fail "--verify does not judge the measurement against the interval: $line"
  fi
  echo "advise ($model, $timed, link from $link_job): $(tr '\n' ' ' <<<"$line")"
done
ok=1
