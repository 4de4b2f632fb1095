#!/usr/bin/env bash
# Faults with the real binaries on loopback (issue "Faults, durability"):
#  A. an agent is killed (-9) mid-task: the task is re-queued within lease +
#     heartbeat, finishes on the other agent as attempt 2, with exactly the
#     expected samples (no duplicates, nothing of attempt 1 mixed in);
#  B. the coordinator is killed (-9) at random moments, ROUNDS times, while a
#     client submits jobs and the agents stream samples: every job whose submit
#     returned OK is there after the restarts, every job finishes with exactly
#     its expected samples, and the store passes PRAGMA integrity_check.
# Usage: chaos_test.sh SERVER AGENT CLI [ROUNDS=5]   (bench/chaos.sh runs many more rounds)
set -euo pipefail
SERVER=$1 AGENT=$2 CLI=$3 ROUNDS=${4:-5}
# shellcheck source=lib.sh
source "$(dirname "$0")/lib.sh"
e2e_begin "chaos"
HEARTBEAT=1 LEASE=3
start_server() { start_coordinator "$SERVER" "$CLI" --heartbeat-seconds $HEARTBEAT --lease-seconds $LEASE; }
start_agent() {  # start_agent ID
  "$AGENT" --agent-id "$1" --threads 1 --qpu-sim off --python-runner off --calibration off \
    >>"$WORK/agent-$1.log" 2>&1 &
  PIDS+=($!)
  eval "PID_$1=$!"
}
field() { jq -r "$1" "$WORK/job.json"; }
measuring() {  # measuring JOB: its task runs and has measured 20 steps
  "$CLI" get job "$1" -o json >"$WORK/job.json" 2>/dev/null &&
    [[ $(field '.tasks[0].state') == TASK_STATE_RUNNING && $(field '.tasks[0].step // "0"') -ge 20 ]]
}
on_attempt_2() {  # on_attempt_2 JOB: its task was re-queued and runs again
  "$CLI" get job "$1" -o json >"$WORK/job.json" 2>/dev/null &&
    [[ $(field '.tasks[0].attempt') == 2 && $(field '.tasks[0].state') == TASK_STATE_RUNNING ]]
}

start_server
start_agent a1
start_agent a2
{ wait_for 60 agent_connected "$CLI" a1 && wait_for 60 agent_connected "$CLI" a2; } || fail "agents did not connect"

# ---- A. agent killed mid-task
MIN=300 INFER=4
"$CLI" submit -b 64 --warmup-steps 2 --min-steps $MIN --min-duration 0 --infer-max-batches $INFER >/dev/null
wait_for 120 measuring job-000001 || fail "task did not start measuring"
VICTIM=$(field '.tasks[0].agent_id')
[[ $VICTIM == a1 || $VICTIM == a2 ]] || fail "unexpected agent $VICTIM"
eval "kill -9 \$PID_$VICTIM"
KILLED_AT=$(date +%s.%N)
wait_for 30 on_attempt_2 job-000001 || fail "task was not re-queued after the agent kill"
REQUEUE_S=$(awk -v a="$(date +%s.%N)" -v b="$KILLED_AT" 'BEGIN { printf "%.1f", a - b }')
"$CLI" watch job-000001 >/dev/null 2>&1 || true
"$CLI" get job job-000001 -o json >"$WORK/job.json"
[[ $(field '.tasks[0].state') == TASK_STATE_SUCCEEDED ]] || fail "task did not finish elsewhere: $(field '.tasks[0].error')"
[[ $(field '.tasks[0].agent_id') != "$VICTIM" ]] || fail "finished on the killed agent"
[[ $(field '.tasks[0].result.samples_stored') == $((MIN + INFER)) ]] \
  || fail "attempt 2 stored $(field '.tasks[0].result.samples_stored') samples, expected $((MIN + INFER))"
echo "chaos A: agent $VICTIM killed; task re-queued and running elsewhere after ${REQUEUE_S} s" \
  "(lease $LEASE s + heartbeat $HEARTBEAT s); finished with exactly $((MIN + INFER)) samples"
awk -v s="$REQUEUE_S" -v l=$((LEASE + HEARTBEAT + 2)) 'BEGIN { exit !(s <= l) }' || fail "re-queue took ${REQUEUE_S} s"
start_agent "$VICTIM"
wait_for 60 agent_connected "$CLI" "$VICTIM" || fail "$VICTIM did not come back"

# ---- A2. an agent frozen mid-task (SIGSTOP: its connection stays open, it just goes silent):
# the lease expires, the task moves on, and when the agent wakes its old attempt is fenced.
"$CLI" submit -b 64 --warmup-steps 2 --min-steps $MIN --min-duration 0 --infer-max-batches $INFER >/dev/null
wait_for 120 measuring job-000002 || fail "second task did not start measuring"
FROZEN=$(field '.tasks[0].agent_id')
eval "kill -STOP \$PID_$FROZEN"
STOPPED_AT=$(date +%s.%N)
wait_for 30 on_attempt_2 job-000002 || fail "task of the frozen agent was not re-queued"
LEASE_REQUEUE_S=$(awk -v a="$(date +%s.%N)" -v b="$STOPPED_AT" 'BEGIN { printf "%.1f", a - b }')
eval "kill -CONT \$PID_$FROZEN"
"$CLI" watch job-000002 >/dev/null 2>&1 || true
"$CLI" get job job-000002 -o json >"$WORK/job.json"
[[ $(field '.tasks[0].state') == TASK_STATE_SUCCEEDED && $(field '.tasks[0].agent_id') != "$FROZEN" ]] \
  || fail "frozen agent's task did not finish elsewhere: $(field '.tasks[0].error')"
[[ $(field '.tasks[0].result.samples_stored') == $((MIN + INFER)) ]] \
  || fail "after fencing: $(field '.tasks[0].result.samples_stored') samples, expected $((MIN + INFER))"
awk -v s="$LEASE_REQUEUE_S" -v l=$((LEASE + HEARTBEAT + 2)) 'BEGIN { exit !(s <= l) }' \
  || fail "lease re-queue took ${LEASE_REQUEUE_S} s"
wait_for 60 agent_connected "$CLI" "$FROZEN" || fail "$FROZEN did not reconnect after waking"
echo "chaos A2: agent $FROZEN frozen (SIGSTOP); lease expired and the task was re-queued after ${LEASE_REQUEUE_S} s;" \
  "woken, it reconnected and nothing of its attempt 1 reached the result; attempt 2 finished elsewhere with exactly $((MIN + INFER)) samples"

# ---- B. coordinator killed at random moments during submits and ingest
: >"$WORK/acked"
submitter() {  # submits small jobs forever; records the ids the coordinator acknowledged
  while true; do
    if out=$("$CLI" --timeout 3 submit -b 128 --warmup-steps 1 --min-steps 15 --min-duration 0 \
        --infer-max-batches 2 2>/dev/null); then
      echo "$out" | grep -E '^job-[0-9]+$' >>"$WORK/acked" || true  # stdout: the id the coordinator acknowledged
    fi
    sleep 0.05
  done
}
submitter &
SUBMITTER=$!
PIDS+=("$SUBMITTER")
for ((r = 1; r <= ROUNDS; r++)); do
  sleep "$(printf '0.%d' $((RANDOM % 10)))"; sleep $((RANDOM % 3))
  kill -9 "$SERVER_PID"
  wait "$SERVER_PID" 2>/dev/null || true
  start_server
done
# Random kills can leave no window long enough for a submit under load (seen in
# CI beside e2e.gang: 5 rounds in 4.2 s, none acknowledged): the last server
# lives until the submitter gets one through, so the checks below have jobs to check.
wait_for 60 test -s "$WORK/acked" || true
kill "$SUBMITTER"
wait "$SUBMITTER" 2>/dev/null || true
ACKED=$(sort -u "$WORK/acked" | grep -c . || true)
((ACKED > 0)) || fail "no submit was acknowledged"
# Every acknowledged job exists and ends; succeeded tasks hold exactly their samples.
wait_for 600 all_jobs_ended "$CLI" || fail "jobs did not finish after the restarts"
while read -r id; do
  jq -e --arg id "$id" '.jobs[] | select(.id == $id)' "$WORK/jobs.json" >/dev/null || fail "acknowledged $id is lost"
  "$CLI" get job "$id" -o json >"$WORK/job.json"
  [[ $(field '.state') == JOB_STATE_SUCCEEDED ]] || fail "$id: $(field '.state') $(field '.tasks[0].error')"
  [[ $(field '.tasks[0].result.samples_stored') == 17 ]] || fail "$id stored $(field '.tasks[0].result.samples_stored') samples"
done < <(sort -u "$WORK/acked")
ATTEMPTS=$(jq '[.jobs[].tasks[].attempt] | add' "$WORK/jobs.json")
RESUMED=$(jq '[.jobs[].tasks[] | (.resumes // 0)] | add' "$WORK/jobs.json")
kill -9 "$SERVER_PID"
[[ $(sqlite3 "$WORK/jobs.db" 'PRAGMA integrity_check;') == ok ]] || fail "store integrity_check"
# Every sample segment holds the bytes its committed batches name (written before each commit).
SEGMENTS=0
while IFS='|' read -r seg bytes; do
  file=$(printf '%s/jobs.db.samples/%06d.seg' "$WORK" "$seg")
  [[ -f $file ]] && (($(stat -c %s "$file") >= bytes)) || fail "sample segment $seg shorter than its $bytes committed bytes"
  SEGMENTS=$((SEGMENTS + 1))
done < <(sqlite3 "$WORK/jobs.db" 'SELECT id, bytes FROM sample_segments;')
((SEGMENTS > 0)) || fail "no sample segment was written"
ok=1
echo "chaos B: $ROUNDS coordinator kills (-9) survived; $ACKED acknowledged jobs all present and succeeded with" \
  "exactly their samples (attempts in all: $ATTEMPTS; attempts resumed across a restart: $RESUMED);" \
  "PRAGMA integrity_check ok; $SEGMENTS sample segment(s) hold their committed bytes"
