#!/usr/bin/env bash
# End to end with the three real binaries as processes on loopback:
#  1. server + agent start; a short mlp job runs; the report has real timings
#     and an accuracy; /metrics shows non-zero sample counts;
#  2. a bad spec is refused (exit 1, field named) and nothing is stored;
#  3. the coordinator is killed (-9) and restarted on the same port and store:
#     the agent reconnects by itself and the next job runs;
#  4. SIGTERM stops both cleanly.
set -euo pipefail
SERVER=$1 AGENT=$2 CLI=$3 FIXTURES=$4
WORK=$(mktemp -d /tmp/hetbench-e2e.XXXXXX)
PIDS=()
cleanup() {
  for p in "${PIDS[@]}"; do kill -9 "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
  if [[ "${KEEP:-0}" == 0 && $ok == 1 ]]; then rm -rf "$WORK"; else echo "e2e: logs kept in $WORK"; fi
}
ok=0
trap cleanup EXIT
fail() { echo "e2e FAILED: $*"; echo "--- server log"; cat "$WORK"/server*.log; echo "--- agent log"; cat "$WORK"/agent.log; exit 1; }

wait_for() {  # wait_for <seconds> <command...>: poll until the command succeeds
  local deadline=$((SECONDS + $1)); shift
  until "$@" >/dev/null 2>&1; do
    ((SECONDS < deadline)) || return 1
    sleep 0.1
  done
}

start_server() {  # start_server <listen> <log>
  "$SERVER" --listen "$1" --metrics-listen 127.0.0.1:0 --db "$WORK/jobs.db" --port-file "$WORK/ports" \
    --heartbeat-seconds 1 --lease-seconds 5 >"$2" 2>&1 &
  SERVER_PID=$!
  PIDS+=("$SERVER_PID")
  wait_for 20 test -s "$WORK/ports" || fail "server did not start"
  GRPC_PORT=$(sed -E 's/.*grpc=([0-9]+).*/\1/' "$WORK/ports")
  METRICS_PORT=$(sed -E 's/.*metrics=([0-9]+).*/\1/' "$WORK/ports")
}

start_server 127.0.0.1:0 "$WORK/server1.log"
export HETBENCH_SERVER=127.0.0.1:$GRPC_PORT
"$AGENT" --agent-id e2e-agent --threads 2 >"$WORK/agent.log" 2>&1 &
AGENT_PID=$!
PIDS+=("$AGENT_PID")
wait_for 30 sh -c "\"$CLI\" get agents | grep -q e2e-agent" || fail "agent did not connect"
[[ $("$CLI" health) == SERVING ]] || fail "health check"

# inventory: this VM offers its CPU (C++ executor and the Python runner) and the simulator,
# and says why there is no GPU, TPU or DPU
"$CLI" get agents >"$WORK/agents.txt" || fail "get agents"
cat "$WORK/agents.txt"
grep -Eq "e2e-agent +cpu0 +cpu .* torch,python " "$WORK/agents.txt" || fail "cpu0 with both executors"
grep -Eq "e2e-agent +qpu0 +qpu-sim " "$WORK/agents.txt" || fail "qpu0"
grep -Eq "e2e-agent +gpu +NVML: cannot load" "$WORK/agents.txt" || fail "why no GPU"
grep -Eq "e2e-agent +tpu +no /dev/accel" "$WORK/agents.txt" || fail "why no TPU"
grep -Eq "e2e-agent +dpu +not a BlueField" "$WORK/agents.txt" || fail "why no DPU"
"$CLI" get agents -o wide >"$WORK/agents-wide.txt" || fail "get agents -o wide"
grep -q "python_runner=Python 3" "$WORK/agents-wide.txt" || fail "wide inventory lacks the runner"
# the agent on a BlueField's Arm cores (fixture tree): its CPU is offered as a dpu
"$AGENT" --agent-id e2e-dpu --sysfs-root "$FIXTURES/bluefield-arm" --python-runner off --qpu-sim off --blas-coretype keep \
  --calibration off --threads 1 >"$WORK/agent-dpu.log" 2>&1 &
DPU_PID=$!
PIDS+=("$DPU_PID")
wait_for 30 sh -c "\"$CLI\" get agents >\"$WORK/agents2.txt\" && grep -q e2e-dpu \"$WORK/agents2.txt\"" \
  || fail "dpu agent did not connect: $(cat "$WORK/agent-dpu.log")"
grep -Eq "e2e-dpu +dpu0 +dpu +BlueField-2 DPU: ARM Cortex-A72 +[0-9]+ +[0-9.]+ +torch " "$WORK/agents2.txt" || fail "BlueField fixture not a dpu"
kill -TERM "$DPU_PID"
wait_for 15 sh -c "! kill -0 $DPU_PID 2>/dev/null" || fail "dpu agent did not stop"

# 1. a short job, end to end
"$CLI" submit --wait -b 128 --warmup-steps 3 --min-steps 60 --min-duration 0 >"$WORK/report.txt" 2>"$WORK/submit.err" \
  || fail "job failed: $(cat "$WORK/submit.err" "$WORK/report.txt")"
cat "$WORK/report.txt"
grep -q "succeeded" "$WORK/report.txt" || fail "report lacks the job state"
grep -Eq "job-000001-t0 +mlp +e2e-agent/cpu0 \(cpu\) +128 +train +60 +[0-9]+\.[0-9]{3}" "$WORK/report.txt" \
  || fail "report lacks 60 measured train steps with timings"
grep -Eq "test accuracy 0\.[5-9][0-9]{3}" "$WORK/report.txt" || fail "report lacks a plausible test accuracy"
# (Outputs go to files first: `cmd | grep -q` would fail under pipefail when grep exits early.)
"$CLI" report job-000001 -o csv >"$WORK/report.csv" || fail "csv report exit code"
grep -q "^job-000001,job-000001-t0,mlp,e2e-agent,cpu0,cpu,128,succeeded,train,60," "$WORK/report.csv" || fail "csv report"
"$CLI" report job-000001 -o json >"$WORK/report.json" || fail "json report exit code"
grep -q '"test_accuracy"' "$WORK/report.json" || fail "json report"

curl -sf "http://127.0.0.1:$METRICS_PORT/metrics" >"$WORK/metrics.txt" || fail "/metrics unreachable"
grep -Eq '^hetbench_samples_ingested_total\{device_kind="cpu",phase="train"\} 60$' "$WORK/metrics.txt" \
  || fail "samples_ingested_total: $(grep samples_ingested "$WORK/metrics.txt")"
grep -Eq '^hetbench_jobs\{state="succeeded"\} 1$' "$WORK/metrics.txt" || fail "jobs gauge"
grep -Eq '^hetbench_agents_connected\{device_kind="cpu"\} 1$' "$WORK/metrics.txt" || fail "agents gauge"
grep -Eq '^hetbench_task_duration_seconds_count\{device_kind="cpu",model="mlp"\} 1$' "$WORK/metrics.txt" \
  || fail "task duration histogram"

# power: on a machine without RAPL/hwmon/GPU the agent says why and falls back to a labelled model
for s in nvml rapl hwmon ipmi; do
  grep -q "power sensor $s.*: unavailable: \|power sensor $s.*: available: " "$WORK/agent.log" || fail "agent did not report sensor $s"
done
grep -q "modeled\*" "$WORK/report.txt" || grep -q "rapl\|nvml\|hwmon" "$WORK/report.txt" || fail "report lacks an energy source"
grep -Eq '^hetbench_device_energy_joules_total\{agent="e2e-agent",device_kind="cpu",source="[a-z]+"\} [1-9]' \
  "$WORK/metrics.txt" || fail "energy counter: $(grep energy_joules "$WORK/metrics.txt")"
grep -Eq '^hetbench_power_sensor_up\{agent="e2e-agent",device_kind="[a-z]+",source="[a-z]+"\} 1$' "$WORK/metrics.txt" \
  || fail "no working power sensor in /metrics"

# 2. bad input: refused, field named, nothing stored
set +e
"$CLI" submit -f "$FIXTURES/specs/bad-batch.yaml" 2>"$WORK/bad.err"; code=$?
set -e
[[ $code == 1 ]] || fail "bad spec exit code $code"
grep -q "batch_sizes\[1\] = 0: must be >= 1" "$WORK/bad.err" || fail "bad spec message: $(cat "$WORK/bad.err")"
set +e
"$CLI" submit --model resnet999 2>"$WORK/bad2.err"; code=$?
set -e
[[ $code == 1 ]] && grep -q 'model = "resnet999": unknown model' "$WORK/bad2.err" || fail "unknown model"
"$CLI" get jobs -o csv >"$WORK/jobs.csv"
[[ $(wc -l <"$WORK/jobs.csv") == 2 ]] || fail "a refused job was stored"

# 3. kill -9 the coordinator; restart it on the same port and store
kill -9 "$SERVER_PID"
wait "$SERVER_PID" 2>/dev/null || true
rm -f "$WORK/ports"
start_server "127.0.0.1:$GRPC_PORT" "$WORK/server2.log"
wait_for 60 sh -c "\"$CLI\" get agents | grep -q e2e-agent" || fail "agent did not reconnect"
"$CLI" get job job-000001 >"$WORK/job1.txt" && grep -q "state: succeeded" "$WORK/job1.txt" \
  || fail "job-000001 lost across the restart"
"$CLI" submit --wait -b 256 --warmup-steps 1 --min-steps 20 --min-duration 0 --infer-max-batches 4 \
  >"$WORK/report2.txt" 2>&1 || fail "job after restart: $(cat "$WORK/report2.txt")"
grep -q "job-000002" "$WORK/report2.txt" || fail "second job id"

# 4. clean shutdown on SIGTERM
kill -TERM "$AGENT_PID" "$SERVER_PID"
wait_for 15 sh -c "! kill -0 $AGENT_PID 2>/dev/null && ! kill -0 $SERVER_PID 2>/dev/null" || fail "no clean SIGTERM shutdown"
grep -q "stopped" "$WORK/server2.log" || fail "server did not log its orderly stop"
ok=1
echo "e2e: all checks passed"
