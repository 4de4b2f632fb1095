#!/usr/bin/env bash
# A replicated serving run with the real binaries on loopback: the null model
# in the server scenario with --replicas 2 over two agents. Each replica runs
# on an agent of its own, issues its share of one seeded global schedule
# (query i on replica i mod 2) from a start agreed on the coordinator's
# clock, and the result merges both replicas' latencies exactly: the merged
# counts are the sums, the merged p99 lies between the replicas' own. Three
# replicas with two agents wait, saying what is missing; bad input is
# refused. Latencies are printed, not judged.
# Usage: serving_replicas_test.sh SERVER AGENT CLI SCHEMA
set -euo pipefail
SERVER=$1 AGENT=$2 CLI=$3 SCHEMA=$4
# shellcheck source=lib.sh
source "$(dirname "$0")/lib.sh"
e2e_begin "serving_replicas"
start_coordinator "$SERVER" "$CLI" --heartbeat-seconds 1
start_agent() {  # start_agent ID PORT_BASE
  "$AGENT" --agent-id "$1" --threads 1 --qpu-sim off --python-runner off --calibration off \
    --rendezvous-port-base "$2" >>"$WORK/agent-$1.log" 2>&1 &
  PIDS+=($!)
}
BASE=$(ports_below_ephemeral 20000 102)
start_agent r1 "$BASE"
start_agent r2 $((BASE + 100))
{ wait_for 60 agent_connected "$CLI" r1 && wait_for 60 agent_connected "$CLI" r2; } || fail "agents did not connect"

if "$CLI" submit -m null --serve offline --replicas 2 >"$WORK/bad.out" 2>&1; then fail "replicas with offline accepted"; fi
grep -qF "serving.replicas = 2: only for scenario server" "$WORK/bad.out" || fail "replicas refusal: $(cat "$WORK/bad.out")"

# ---- two replicas, 3,000 queries/s in all for 1 s
job=$("$CLI" submit -m null -b 8 -t cpu --serve server --qps 3000 --latency-bound-ms 20 --serve-duration 1 \
  --serve-min-queries 2000 --replicas 2) || fail "submit the replicated run failed"
"$CLI" watch "$job" >/dev/null 2>&1 || true
"$CLI" get job "$job" -o json >"$WORK/rep.json"
[[ $(jq -r '.state' "$WORK/rep.json") == JOB_STATE_SUCCEEDED ]] \
  || fail "the replicated run did not succeed: $(jq -c '[.tasks[].error]' "$WORK/rep.json")"
[[ $(jq -r '[.tasks[].agent_id] | sort | join(",")' "$WORK/rep.json") == "r1,r2" ]] \
  || fail "the replicas are not on distinct agents: $(jq -c '[.tasks[].agent_id]' "$WORK/rep.json")"
[[ $(jq -r '[.tasks[].result.serving.replica.rank] | sort | join(",")' "$WORK/rep.json") == "0,1" ]] \
  || fail "the replicas do not carry their ranks"
start0=$(jq -r '.tasks[0].result.serving.replica.start_coordinator_ns' "$WORK/rep.json")
start1=$(jq -r '.tasks[1].result.serving.replica.start_coordinator_ns' "$WORK/rep.json")
[[ $start0 == "$start1" && $start0 != 0 ]] || fail "the replicas did not agree on one start: $start0 vs $start1"
a0=$(jq -r '.tasks[0].result.serving.queries_answered' "$WORK/rep.json")
a1=$(jq -r '.tasks[1].result.serving.queries_answered' "$WORK/rep.json")
m=".tasks[1].result.serving.merged"
[[ $(jq -r "$m.replicas" "$WORK/rep.json") == 2 ]] || fail "no merged figures on the last replica"
[[ $(jq -r "$m.serving.queries_answered" "$WORK/rep.json") == $((a0 + a1)) ]] || fail "merged queries are not the sum"
(( a0 + a1 >= 2000 )) || fail "the replicas answered $a0 + $a1 queries: fewer than the global minimum 2000"
(( a0 - a1 <= 1 && a1 - a0 <= 1 )) || fail "the shares are not i mod 2: $a0 and $a1"
[[ $(jq -c '.tasks[0].result.serving.merged.serving.latency_p99_ns' "$WORK/rep.json") == \
   $(jq -c "$m.serving.latency_p99_ns" "$WORK/rep.json") ]] || fail "the replicas do not hold the same merged figures"
# the union's p99 lies between the replicas' own (its exactness against the
# union of raw latencies: ReplicaMergeTest)
merged_p99=$(jq -r "$m.serving.latency_p99_ns" "$WORK/rep.json")
lo=$(jq -r '[.tasks[].result.serving.latency_p99_ns | tonumber] | min' "$WORK/rep.json")
hi=$(jq -r '[.tasks[].result.serving.latency_p99_ns | tonumber] | max' "$WORK/rep.json")
(( merged_p99 >= lo && merged_p99 <= hi )) || fail "merged p99 $merged_p99 ns outside the replicas' [$lo, $hi]"
/usr/bin/python3 "$(dirname "$0")/validate_json.py" "$SCHEMA" "$WORK/rep.json" || fail "-o json does not match $SCHEMA"
"$CLI" report "$job" >"$WORK/rep.txt" || fail "report failed"
grep -q "merged" "$WORK/rep.txt" || fail "no merged row in the serving table"
grep -q "replica 1 of 2" "$WORK/rep.txt" || fail "no replica footer"
sed -n '/^Serving/,/^$/p' "$WORK/rep.txt"
grep -o "replica 1 of 2.*" "$WORK/rep.txt" | head -1
echo "serving replicas: $(jq -c "$m | {serving: {achieved_qps: .serving.achieved_qps, latency_p99_ns: .serving.latency_p99_ns}, valid: .phase.valid, reasons: .phase.invalid_reasons, max_clock_bound_ns}" "$WORK/rep.json")"

# ---- three replicas with two agents: the run waits and says what is missing
job=$("$CLI" submit -m null -b 8 -t cpu --serve server --qps 100 --latency-bound-ms 20 --serve-duration 0.5 \
  --serve-min-queries 50 --replicas 3) || fail "submit 3 replicas failed"
reason() { "$CLI" get job "$job" -o json | jq -r '.tasks[0].pending_reason // ""'; }
wait_for 20 bash -c "[[ \$('$CLI' get job $job -o json | jq -r '.tasks[0].pending_reason // \"\"') == *'each on an agent of its own'* ]]" ||
  fail "3 replicas on 2 agents: no pending reason naming what is missing: $(reason)"
echo "serving replicas: waiting: $(reason)"
"$CLI" cancel "$job" >/dev/null || fail "cancel failed"
ok=1
