#!/usr/bin/env bash
# `hetbench advise --verify` with the real binaries on loopback: a qnn job
# timed per layer on cpu and qpu-sim, the advisor's plan (-o json and the
# table), and --verify, which submits the advised split, waits for it and
# prints predicted against measured. The error is printed, not judged: a
# timing threshold would make the test depend on the machine's load.
# Usage: advise_test.sh SERVER AGENT CLI
set -euo pipefail
SERVER=$1 AGENT=$2 CLI=$3
# shellcheck source=lib.sh
source "$(dirname "$0")/lib.sh"
e2e_begin "advise"
PORT=$((20000 + RANDOM % 20000))
export HETBENCH_SERVER=127.0.0.1:$PORT
"$SERVER" --listen "127.0.0.1:$PORT" --metrics-listen "" --db "$WORK/jobs.db" >>"$WORK/server.log" 2>&1 &
PIDS+=($!)
wait_for 20 "$CLI" health || fail "server did not start"
"$AGENT" --agent-id adv --threads 1 --python-runner off --calibration off >>"$WORK/agent.log" 2>&1 &
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
ok=1
