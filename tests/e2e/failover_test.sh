#!/usr/bin/env bash
# Failover with the real binaries on loopback (issue "Coordinator state in
# PostgreSQL"): one PostgreSQL server (initdb into the work directory, run as
# the unprivileged postgres user when root), two coordinators on it (leader and
# standby), two agents and a client that submits, all given both addresses.
#  A. the leader is killed (-9) KILLS times at random moments: each time the
#     standby serves within leader lease + 2 s (printed per kill), and the
#     killed one comes back as the standby;
#  B. a leader frozen with SIGSTOP loses leadership after its lease; woken with
#     SIGCONT it cannot write (refused by the database) and steps down;
#  then every acknowledged job ends, every task holds exactly its samples, and
#  the database shows one job per submit and one holder per epoch.
# Usage: failover_test.sh SERVER AGENT CLI [KILLS=20]
set -euo pipefail
SERVER=$1 AGENT=$2 CLI=$3 KILLS=${4:-20}
# shellcheck source=lib.sh
source "$(dirname "$0")/lib.sh"
e2e_begin "failover"
LEASE=2
chmod 755 "$WORK"

# ---- PostgreSQL
PGBIN=$(find /usr/lib/postgresql -maxdepth 2 -name bin -type d | sort | tail -n 1)
[[ -x $PGBIN/initdb ]] || fail "no PostgreSQL server; run scripts/install-deps"
AS=()
if [[ $(id -u) == 0 ]]; then AS=(runuser -u postgres --); fi
mkdir "$WORK/pg"
[[ $(id -u) == 0 ]] && chown postgres "$WORK/pg"
stop_postgres() { "${AS[@]}" "$PGBIN/pg_ctl" -D "$WORK/pg/data" -m immediate -w stop >/dev/null 2>&1 || true; }
trap 'stop_postgres; e2e_cleanup' EXIT
"${AS[@]}" "$PGBIN/initdb" -D "$WORK/pg/data" -A trust -U postgres --no-sync -E UTF8 --locale=C >"$WORK/initdb.log" 2>&1 \
  || fail "initdb"
"${AS[@]}" "$PGBIN/pg_ctl" -D "$WORK/pg/data" -l "$WORK/pg/server.log" -w -t 60 \
  -o "-k $WORK/pg -p 5432 -c listen_addresses=" start >"$WORK/pg_ctl.log" 2>&1 || fail "pg_ctl start"
psql_q() { "$PGBIN/psql" -X -A -t -v ON_ERROR_STOP=1 "postgresql://postgres@/$1?host=$WORK/pg&port=5432" -c "$2"; }
psql_q postgres "CREATE DATABASE hetbench" >/dev/null
URL="postgresql://postgres@/hetbench?host=$WORK/pg&port=5432"

# ---- two coordinators, two agents
PORT_A=$(ports_below_ephemeral 10000 2 20000)
PORT_B=$((PORT_A + 1))
export HETBENCH_SERVER=127.0.0.1:$PORT_A,127.0.0.1:$PORT_B
start_coordinator() {  # start_coordinator PORT
  "$SERVER" --listen "127.0.0.1:$1" --metrics-listen "" --db "$URL" --leader-lease-seconds $LEASE \
    --heartbeat-seconds 1 --lease-seconds 6 >>"$WORK/coordinator-$1.log" 2>&1 &
  PIDS+=($!)
  eval "PID_$1=$!"
}
serving() { [[ $("$CLI" --server "127.0.0.1:$1" health 2>/dev/null) == SERVING ]]; }
leader_port() {
  if serving $PORT_A; then echo $PORT_A; elif serving $PORT_B; then echo $PORT_B; else return 1; fi
}
now() { date +%s.%N; }
since() { awk -v a="$(now)" -v b="$1" 'BEGIN { printf "%.2f", a - b }'; }
start_coordinator $PORT_A
wait_for 20 serving $PORT_A || fail "the first coordinator did not become leader"
start_coordinator $PORT_B
wait_for 20 grep -q "standby of" "$WORK/coordinator-$PORT_B.log" || fail "the second coordinator is not standing by"
[[ $("$CLI" --server "127.0.0.1:$PORT_B" health 2>/dev/null) == NOT_SERVING ]] || fail "the standby does not answer NOT_SERVING"
for id in a1 a2; do
  "$AGENT" --agent-id $id --threads 1 --qpu-sim off --python-runner off --calibration off >>"$WORK/agent-$id.log" 2>&1 &
  PIDS+=($!)
done
{ wait_for 60 agent_connected "$CLI" a1 && wait_for 60 agent_connected "$CLI" a2; } || fail "agents did not connect"

: >"$WORK/acked"
submitter() {  # submits small jobs forever through both addresses; records the acknowledged ids
  while true; do
    if out=$("$CLI" --timeout 3 submit -b 128 --warmup-steps 1 --min-steps 15 --min-duration 0 \
      --infer-max-batches 2 2>>"$WORK/submitter.log"); then
      echo "$out" | grep -E '^job-[0-9]+$' >>"$WORK/acked" || true
    fi
    sleep 0.05
  done
}
submitter &
SUBMITTER=$!
PIDS+=("$SUBMITTER")

# ---- A. kill -9 the leader, KILLS times
WORST=0
for ((k = 1; k <= KILLS; k++)); do
  sleep "$(printf '0.%d' $((RANDOM % 10)))"
  sleep $((RANDOM % 2))
  wait_for 20 leader_port || fail "no leader before kill $k"
  L=$(leader_port)
  S=$((L == PORT_A ? PORT_B : PORT_A))
  eval "VICTIM=\$PID_$L"
  kill -9 "$VICTIM"
  KILLED_AT=$(now)
  wait "$VICTIM" 2>/dev/null || true
  until serving $S; do
    awk -v s="$(since "$KILLED_AT")" -v l=$((LEASE + 10)) 'BEGIN { exit !(s > l) }' && fail "kill $k: no takeover"
    sleep 0.05
  done
  TOOK=$(since "$KILLED_AT")
  echo "failover kill $k/$KILLS: leader on :$L killed (-9); standby on :$S serving after $TOOK s (bound: lease $LEASE s + 2 s)"
  awk -v s="$TOOK" -v l=$((LEASE + 2)) 'BEGIN { exit !(s <= l) }' || fail "kill $k: takeover took $TOOK s"
  WORST=$(awk -v a="$WORST" -v b="$TOOK" 'BEGIN { print (b > a ? b : a) }')
  start_coordinator "$L"  # back as the standby
  wait_for 20 grep -q "standby of" "$WORK/coordinator-$L.log" || fail "kill $k: the restarted coordinator is not standing by"
done

# ---- B. a leader frozen (SIGSTOP) past its lease, then woken: it cannot write
L=$(leader_port)
S=$((L == PORT_A ? PORT_B : PORT_A))
eval "FROZEN=\$PID_$L"
EPOCH_BEFORE=$(psql_q hetbench "SELECT epoch FROM hetbench_leader")
kill -STOP "$FROZEN"
STOPPED_AT=$(now)
wait_for $((LEASE + 10)) serving $S || fail "no takeover from the frozen leader"
FREEZE_TOOK=$(since "$STOPPED_AT")
awk -v s="$FREEZE_TOOK" -v l=$((LEASE + 2)) 'BEGIN { exit !(s <= l) }' || fail "takeover from a frozen leader took $FREEZE_TOOK s"
kill -CONT "$FROZEN"
wait_for 20 bash -c "! kill -0 $FROZEN 2>/dev/null" || fail "the woken leader did not step down"
wait "$FROZEN" 2>/dev/null && fail "the woken leader exited 0" || true
grep -q "deposed" "$WORK/coordinator-$L.log" || fail "the woken leader did not say it was deposed"
echo "failover frozen: leader on :$L stopped (SIGSTOP); standby on :$S serving after $FREEZE_TOOK s; woken, it" \
  "stepped down ($(grep -m1 -o 'deposed: [^;]*' "$WORK/coordinator-$L.log" | cut -c1-90))"
start_coordinator "$L"

kill "$SUBMITTER"
wait "$SUBMITTER" 2>/dev/null || true
ACKED=$(sort -u "$WORK/acked" | grep -c . || true)
((ACKED > 0)) || fail "no submit was acknowledged"
wait_for 600 all_jobs_ended "$CLI" || fail "jobs did not finish after the failovers"
field() { jq -r "$1" "$WORK/job.json"; }
while read -r id; do
  jq -e --arg id "$id" '.jobs[] | select(.id == $id)' "$WORK/jobs.json" >/dev/null || fail "acknowledged $id is lost"
  "$CLI" get job "$id" -o json >"$WORK/job.json"
  [[ $(field '.state') == JOB_STATE_SUCCEEDED ]] || fail "$id: $(field '.state') $(field '.tasks[0].error')"
  [[ $(field '.tasks[0].result.samples_stored') == 17 ]] || fail "$id stored $(field '.tasks[0].result.samples_stored') samples"
  # From the database: the samples of the attempt that counted, each stored once.
  STORED=$(psql_q hetbench "SELECT coalesce(sum(sample_count), 0) FROM sample_batches WHERE task_id = '$id-t0' AND attempt = $(field '.tasks[0].attempt')")
  [[ $STORED == 17 ]] || fail "$id: the database holds $STORED samples of attempt $(field '.tasks[0].attempt')"
done < <(sort -u "$WORK/acked")
# No double acknowledgement: one job per submit request, one holder per
# epoch, and epochs granted in order, one per takeover.
DUP_REQUESTS=$(psql_q hetbench "SELECT count(*) FROM (SELECT request_id FROM jobs WHERE request_id IS NOT NULL GROUP BY request_id HAVING count(*) > 1) d")
[[ $DUP_REQUESTS == 0 ]] || fail "$DUP_REQUESTS submit requests made more than one job"
[[ $(sort "$WORK/acked" | uniq -d | grep -c . || true) == 0 ]] || fail "one job id acknowledged to two submits"
EPOCHS=$(psql_q hetbench "SELECT count(*) FROM hetbench_leaders")
MAX_EPOCH=$(psql_q hetbench "SELECT max(epoch) FROM hetbench_leaders")
[[ $EPOCHS == "$MAX_EPOCH" ]] || fail "epochs are not 1..$MAX_EPOCH ($EPOCHS granted)"
((EPOCHS >= KILLS + 2)) || fail "only $EPOCHS epochs for $KILLS kills and a freeze"
ATTEMPTS=$(jq '[.jobs[].tasks[].attempt] | add' "$WORK/jobs.json")
RESUMED=$(jq '[.jobs[].tasks[] | (.resumes // 0)] | add' "$WORK/jobs.json")
JOBS=$(jq '.jobs | length' "$WORK/jobs.json")
ok=1
echo "failover: $KILLS leader kills (-9) and one freeze survived; slowest takeover $WORST s (lease $LEASE s);" \
  "$ACKED acknowledged jobs (of $JOBS) all succeeded with exactly their 17 samples, checked in the database;" \
  "$EPOCHS epochs, one holder each; no request made two jobs (attempts in all: $ATTEMPTS; resumed: $RESUMED)"
