#!/usr/bin/env bash
# Data-parallel gangs with the real binaries on loopback (issue "Many devices,
# many nodes"):
#  A. `--parallel 1,2` over two agents: the gang of 2 runs one rank on each
#     agent (c10d/Gloo through rank 0's TCPStore), both ranks store their
#     samples, report the all-reduce split and end with equal parameters;
#  B. one rank's agent is killed (-9) mid-task: the other rank fails within
#     the collective timeout, the gang goes back to the queue as a whole, and
#     once the agent is back it runs again as attempt 2 and succeeds;
#  C. one rank's agent is frozen (SIGSTOP: no connection breaks, the peer
#     just stops answering): the other rank's all-reduce times out (5 s), the
#     gang goes back to the queue, and after SIGCONT it runs again and succeeds;
#  D. a split across agents (mlp 0-2 | 3-): a stage per agent, rank 0 reports
#     both stages with the link's bytes, both report the same loss, and the
#     test batches go through both stages (same accuracy on both);
#  E. the later stage's agent is killed mid-split: both stages go back to the
#     queue within the transfer timeout and the retry succeeds.
# Usage: gang_test.sh SERVER AGENT CLI
set -euo pipefail
SERVER=$1 AGENT=$2 CLI=$3
# shellcheck source=lib.sh
source "$(dirname "$0")/lib.sh"
e2e_begin "gang"
start_coordinator "$SERVER" "$CLI" --heartbeat-seconds 1 --lease-seconds 3
start_agent() {  # start_agent ID PORT_BASE
  "$AGENT" --agent-id "$1" --threads 1 --qpu-sim off --python-runner off --calibration off \
    --rendezvous-port-base "$2" >>"$WORK/agent-$1.log" 2>&1 &
  PIDS+=($!)
  eval "PID_$1=$!"
}
BASE=$(ports_below_ephemeral 20000 102)
start_agent a1 "$BASE"
start_agent a2 $((BASE + 100))
{ wait_for 60 agent_connected "$CLI" a1 && wait_for 60 agent_connected "$CLI" a2; } || fail "agents did not connect"

# ---- A. a gang of 1 and a gang of 2
"$CLI" submit -b 32 --parallel 1,2 --warmup-steps 2 --min-steps 40 --min-duration 0 --infer-max-batches 2 \
  >/dev/null
"$CLI" watch job-000001 >/dev/null 2>&1 || true
"$CLI" get job job-000001 -o json >"$WORK/a.json"
q() { jq -r "$1" "$WORK/a.json"; }
[[ $(q '.state') == JOB_STATE_SUCCEEDED ]] || fail "job A: $(q '.state') $(q '.error')"
[[ $(q '.tasks | length') == 3 ]] || fail "job A has $(q '.tasks | length') tasks, expected 1 + 2 ranks"
[[ $(q '[.tasks[] | select(.gang.world_size == 2)] | map(.agent_id) | unique | length') == 2 ]] \
  || fail "the two ranks did not run on the two agents"
for t in 1 2; do
  [[ $(q ".tasks[$t].result.samples_stored") == 42 ]] || fail "rank task $t stored $(q ".tasks[$t].result.samples_stored") samples"
  [[ $(q ".tasks[$t].result.parallel.backend") == gloo ]] || fail "rank task $t: no gloo all-reduce"
  [[ $(q ".tasks[$t].result.parallel.allreduce.count") == 40 ]] || fail "rank task $t: all-reduce count"
done
[[ $(q '.tasks[1].result.parallel.parameter_checksum') == $(q '.tasks[2].result.parallel.parameter_checksum') ]] \
  || fail "the ranks ended with different parameters"
echo "gang A: 2 ranks on a1 and a2; all-reduce p50 $(q '.tasks[1].result.parallel.allreduce.p50_ns') ns of" \
  "$(q '.tasks[1].result.parallel.bytes_per_step') bytes; equal parameter checksums"

# ---- B. kill one rank's agent mid-task
cat >"$WORK/b.yaml" <<YAML
models: [mlp]
batch_sizes: [32]
parallel: {devices: [2], collective_timeout_seconds: 5}
train: {warmup_steps: 2, min_steps: 600, min_duration_seconds: 0}
inference: {max_batches: 2}
YAML
count_tasks() {  # count_tasks JOB FILE FILTER: the job's tasks matching the jq filter (the job left in FILE)
  "$CLI" get job "$1" -o json >"$2" 2>/dev/null && jq "[.tasks[] | select($3)] | length" "$2"
}
both_measuring() { [[ $(count_tasks "$1" "$2" '.state == "TASK_STATE_RUNNING" and (.step // "0" | tonumber) >= 20') == 2 ]]; }
both_requeued() { [[ $(count_tasks "$1" "$2" '.state == "TASK_STATE_QUEUED" and .attempt == 1') == 2 ]]; }
# kill_rank_1 JOB FILE WHAT: once both ranks measure, kill -9 rank 1's agent
# and expect both back in the queue within the 5 s timeout + 5; sets VICTIM, BACK_S.
kill_rank_1() {
  wait_for 120 both_measuring "$1" "$2" || fail "$3 did not start measuring"
  VICTIM=$(jq -r '.tasks[1].agent_id' "$2")
  eval "kill -9 \$PID_$VICTIM"
  local killed_at
  killed_at=$(date +%s.%N)
  wait_for 30 both_requeued "$1" "$2" || fail "$3 did not go back to the queue after the kill"
  BACK_S=$(awk -v a="$(date +%s.%N)" -v b="$killed_at" 'BEGIN { printf "%.1f", a - b }')
  awk -v s="$BACK_S" 'BEGIN { exit !(s <= 5 + 5) }' || fail "$3 took ${BACK_S} s to fail (timeout 5 s + 5)"
}
"$CLI" submit -f "$WORK/b.yaml" >/dev/null
kill_rank_1 job-000002 "$WORK/b.json" "gang B"
jq -e '[.tasks[].error] | any(test("a collective failed"))' "$WORK/b.json" >/dev/null \
  || fail "the surviving rank did not report its failed collective"
echo "gang B: $VICTIM killed; both ranks back in the queue after ${BACK_S} s;" \
  "errors: $(jq -r '[.tasks[].error] | unique | join(" | ")' "$WORK/b.json" | cut -c1-300)"
start_agent "$VICTIM" $((BASE + 200))
"$CLI" watch job-000002 >/dev/null 2>&1 || true
"$CLI" get job job-000002 -o json >"$WORK/b.json"
[[ $(jq -r '.state' "$WORK/b.json") == JOB_STATE_SUCCEEDED ]] || fail "gang B did not succeed: $(jq -r '.error' "$WORK/b.json")"
# The restarted agent calibrates its device before its rank joins; the 5 s collective timeout
# also bounds the rendezvous, so on a loaded machine attempt 2 can time out there and the gang
# runs again as a whole. Either way both ranks end on one attempt after the kill, each complete.
B_ATTEMPT=$(jq -r '.tasks[0].attempt' "$WORK/b.json")
[[ $B_ATTEMPT -ge 2 && $(jq --argjson a "$B_ATTEMPT" \
    '[.tasks[] | select(.attempt == $a and (.result.samples_stored | tonumber) == 602)] | length' "$WORK/b.json") == 2 ]] \
  || fail "gang B: both ranks should finish one attempt after the kill (2 or later) with 602 samples each"
echo "gang B: re-run as attempt $B_ATTEMPT on both ranks, 602 samples each"

# ---- C. freeze one rank's agent mid-task
"$CLI" submit -f "$WORK/b.yaml" >/dev/null
wait_for 120 both_measuring job-000003 "$WORK/c.json" || fail "gang C did not start measuring"
FROZEN=$(jq -r '.tasks[1].agent_id' "$WORK/c.json")
eval "kill -STOP \$PID_$FROZEN"
STOPPED_AT=$(date +%s.%N)
wait_for 30 both_requeued job-000003 "$WORK/c.json" || { eval "kill -CONT \$PID_$FROZEN"; fail "the gang did not go back to the queue after the freeze"; }
FROZEN_S=$(awk -v a="$(date +%s.%N)" -v b="$STOPPED_AT" 'BEGIN { printf "%.1f", a - b }')
eval "kill -CONT \$PID_$FROZEN"
awk -v s="$FROZEN_S" 'BEGIN { exit !(s <= 5 + 5) }' || fail "the frozen gang took ${FROZEN_S} s to fail (timeout 5 s + 5)"
echo "gang C: $FROZEN frozen; both ranks back in the queue after ${FROZEN_S} s (agent lease 3 s, collective timeout 5 s: the first to expire)"
"$CLI" watch job-000003 >/dev/null 2>&1 || true
"$CLI" get job job-000003 -o json >"$WORK/c.json"
[[ $(jq -r '.state' "$WORK/c.json") == JOB_STATE_SUCCEEDED ]] || fail "gang C did not succeed: $(jq -r '.error' "$WORK/c.json")"
echo "gang C: after SIGCONT the gang re-ran as attempt $(jq -r '.tasks[0].attempt' "$WORK/c.json") and succeeded"

# ---- D. a split across agents: mlp layers 0-2 on one agent, 3- on the other;
# then its later stage's agent is killed mid-task and the split runs again.
cat >"$WORK/d.yaml" <<YAML
models: [mlp]
batch_sizes: [64]
split:
  across_agents: true
  collective_timeout_seconds: 5
  stages:
    - {layers: "0-2", target: {device_kind: cpu}}
    - {layers: "3-", target: {device_kind: cpu}}
train: {warmup_steps: 5, min_steps: 200, min_duration_seconds: 0}
inference: {max_batches: 10}
YAML
"$CLI" submit -f "$WORK/d.yaml" >/dev/null
"$CLI" watch job-000004 >/dev/null 2>&1 || true
"$CLI" get job job-000004 -o json >"$WORK/d.json"
q() { jq -r "$1" "$WORK/d.json"; }
[[ $(q '.state') == JOB_STATE_SUCCEEDED ]] || fail "split D: $(q '.state') $(q '.error') $(q '[.tasks[].error] | join(" | ")')"
[[ $(q '.tasks | map(.agent_id) | unique | length') == 2 ]] || fail "split D: the two stages did not run on two agents"
[[ $(q '.tasks[0].result.split | length') == 2 ]] || fail "split D: rank 0 reports $(q '.tasks[0].result.split | length') stages"
# The boundary: 64 x 512 floats each way, what it is + rows forward, hold time + loss + 3 figures back.
[[ $(q '.tasks[0].result.split[0].transfer_bytes') == $((4 * (64 * 512 + 2 + 64 * 512 + 5))) ]] \
  || fail "split D: transfer bytes $(q '.tasks[0].result.split[0].transfer_bytes')"
[[ $(q '.tasks[0].result.split[1].agent_id') == $(q '.tasks[1].agent_id') ]] || fail "split D: stage 1's agent"
[[ $(q '.tasks[0].result.final_train_loss') == $(q '.tasks[1].result.final_train_loss') ]] \
  || fail "split D: the stages report different losses"
for t in 0 1; do
  [[ $(q ".tasks[$t].result.samples_stored") == 210 ]] \
    || fail "split D: stage $t stored $(q ".tasks[$t].result.samples_stored") samples, not 200 steps + 10 test batches"
done
# The last stage scores the test batches; the totals come back to the first.
[[ $(q '.tasks[0].result.test_accuracy') == $(q '.tasks[1].result.test_accuracy') ]] \
  || fail "split D: the stages report different accuracies"
awk -v a="$(q '.tasks[0].result.test_accuracy')" 'BEGIN { exit !(a > 0.5) }' \
  || fail "split D: test accuracy $(q '.tasks[0].result.test_accuracy') after 200 steps (chance is 0.1)"
"$CLI" report job-000004 >"$WORK/d.txt"
grep -q "a2/cpu0 (cpu)\|a1/cpu0 (cpu)" "$WORK/d.txt" || fail "split D: the report does not name the stages' agents"
jq -e '.tasks[0].result.split[0].link_latency_ns > 0 and .tasks[0].result.split[0].link_gbytes_per_second > 0' \
  "$WORK/d.json" >/dev/null || fail "split D: stage 0's link was not probed"
echo "split D: stages on $(q '[.tasks[].agent_id] | join(" + ")'); step p50 $(q '.tasks[0].result.split[0].step_ns') ns," \
  "link $(q '.tasks[0].result.split[0].transfer_ns') ns for $(q '.tasks[0].result.split[0].transfer_bytes') bytes" \
  "(probed: $(q '.tasks[0].result.split[0].link_latency_ns | floor') ns one way, $(q '.tasks[0].result.split[0].link_gbytes_per_second') GB/s);" \
  "test accuracy $(q '.tasks[0].result.test_accuracy') on both stages"

sed -i 's/min_steps: 200/min_steps: 800/' "$WORK/d.yaml"
"$CLI" submit -f "$WORK/d.yaml" >/dev/null
kill_rank_1 job-000005 "$WORK/e.json" "split E"
start_agent "$VICTIM" $((BASE + 300))
"$CLI" watch job-000005 >/dev/null 2>&1 || true
[[ $("$CLI" get job job-000005 -o json | jq -r '.state') == JOB_STATE_SUCCEEDED ]] || fail "split E did not succeed on its retry"
echo "split E: stage 1's agent $VICTIM killed; both stages back in the queue after ${BACK_S} s; the retry succeeded"
ok=1
