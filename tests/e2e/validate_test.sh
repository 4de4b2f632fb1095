#!/usr/bin/env bash
# Fleet validation with the real binaries on loopback: bad input refused
# before anything is stored; an absent kind SKIPPED with the agent's reason;
# cpu0 and qpu0 validated (quick); a baseline saved from runs and shown; a
# device whose matmul fails (the agent's --validation-fault drill) FAILs and
# is quarantined: an ordinary job that can only run there waits with a
# pending reason naming it, and runs once a revalidation of the repaired
# device passes; the two agents' all-reduce pair (Gloo on loopback) measures
# on both. Figures are printed, not judged (this VM's speed drifts).
# Usage: validate_test.sh SERVER AGENT CLI
set -euo pipefail
SERVER=$1 AGENT=$2 CLI=$3
# shellcheck source=lib.sh
source "$(dirname "$0")/lib.sh"
e2e_begin "validate"
start_coordinator "$SERVER" "$CLI"
BASE=$(ports_below_ephemeral 20000 102)  # the agents' rendezvous ports (an all-reduce pair's store)
"$AGENT" --agent-id good --threads 1 --python-runner off --calibration off --rendezvous-port-base "$BASE" \
  >>"$WORK/good.log" 2>&1 &
PIDS+=($!)
wait_for 60 agent_connected "$CLI" good || fail "agent good did not connect"

# ---- bad input: refused naming the field, nothing stored
expect_refused() {  # expect_refused WHAT -- VALIDATE_FLAGS...
  local what=$1; shift 2
  local rc=0
  "$CLI" validate "$@" >"$WORK/bad.out" 2>&1 || rc=$?
  [[ $rc == 2 ]] || fail "validate $* exited $rc, not 2 (usage): $(cat "$WORK/bad.out")"
  grep -qF -- "$what" "$WORK/bad.out" || fail "the error for '$*' does not say '$what': $(cat "$WORK/bad.out")"
}
expect_refused "validate.level = 'deep': unknown; use quick or standard" -- --level deep
expect_refused "validate.time_box_seconds = 0: must be in (0, 60]" -- --time-box 0
expect_refused "validate.tests[0] = 'matmull': unknown test" -- --tests matmull
echo '{"schema": "hetbench.baseline.v0", "skus": []}' >"$WORK/old.json"
expect_refused "schema = 'hetbench.baseline.v0': this coordinator reads hetbench.baseline.v1" -- --baseline "$WORK/old.json"
[[ $("$CLI" get jobs -o json | jq '.jobs | length') == 0 ]] || fail "a refused validation left a job behind"

# ---- an absent kind: SKIPPED with the agent's own reason, exit 1 (nothing validated)
rc=0
"$CLI" validate --device-kind gpu >"$WORK/gpu.out" 2>"$WORK/gpu.err" || rc=$?
[[ $rc == 1 ]] || fail "validate --device-kind gpu exited $rc, not 1: $(cat "$WORK/gpu.out" "$WORK/gpu.err")"
grep -q "SKIPPED.*no gpu device: NVML" "$WORK/gpu.out" || fail "the absent gpu is not SKIPPED with its reason: $(cat "$WORK/gpu.out")"
grep -q "no device was validated" "$WORK/gpu.err" || fail "validate does not say nothing was validated"

# ---- cpu0 and qpu0, quick: both PASS
"$CLI" validate -o json >"$WORK/quick.json" || fail "validate of cpu0 and qpu0 did not pass: $(cat "$WORK/quick.json")"
[[ $(jq '[.validation.devices[] | select(.verdict == "VERDICT_PASS")] | length' "$WORK/quick.json") == 2 ]] ||
  fail "cpu0 and qpu0 did not both pass: $(jq -c '.validation.devices' "$WORK/quick.json")"
first=$(jq -r '.id' "$WORK/quick.json")
for t in matmul memory_bandwidth train_mlp infer_mlp train_cnn infer_cnn gate_bandwidth; do
  "$CLI" get job "$first" -o json | jq -e --arg t "$t" \
    '[.tasks[].result.validation.tests[] | select(.name == $t and .outcome == "TEST_OUTCOME_MEASURED")] | length == 1' \
    >/dev/null || fail "test $t was not measured"
done
echo "validate: quick on cpu0 and qpu0: $("$CLI" get job "$first" -o json | jq -c '[.tasks[].result.validation.tests[] | {(.name): ((.values // []) | sort | .[length / 2 | floor])}] | add')"
"$CLI" report "$first" | grep -q "thresholds: a test is DEGRADED" || fail "report of a validation job does not print its verdicts"
second=$("$CLI" validate --device-kind cpu --no-wait)
"$CLI" watch "$second" >/dev/null 2>&1 || true
"$CLI" baseline save "$first,$second" --name e2e --out "$WORK/base.json" || fail "baseline save failed"
"$CLI" baseline show "$WORK/base.json" | grep -q "sku cpu|" || fail "baseline show does not list the cpu SKU"
[[ $(jq -r '.skus[] | select(.sku | startswith("cpu|")) | .metrics[] | select(.test == "matmul") | .runs' "$WORK/base.json") == 2 ]] ||
  fail "the baseline does not say it came from 2 runs"
"$CLI" baseline diff "$WORK/base.json" "$WORK/base.json" | grep -q "1.000" || fail "baseline diff of a file with itself is not 1.000"
# Versioned in the coordinator: two saves of one name are v1 and v2.
"$CLI" baseline save "$first" --name e2e | grep -q "saved baseline e2e v1" || fail "the first stored baseline is not v1"
"$CLI" baseline save "$first,$second" --name e2e | grep -q "saved baseline e2e v2" || fail "the second stored baseline is not v2"
[[ $("$CLI" baseline list e2e -o json | jq '.baselines | length') == 2 ]] || fail "baseline list does not show both versions"
"$CLI" baseline show e2e | grep -q "baseline e2e v2" || fail "baseline show NAME is not the latest version"
"$CLI" baseline diff e2e@1 e2e@2 | grep -q "matmul" || fail "baseline diff of two stored versions shows no matmul"
if "$CLI" baseline show e2e@9 >"$WORK/missing.out" 2>&1; then fail "baseline show of a missing version succeeded"; fi
grep -q "baseline e2e v9: not stored" "$WORK/missing.out" || fail "a missing version is not named: $(cat "$WORK/missing.out")"

# ---- a device that computes wrong numbers: FAIL, quarantined, released by a passing revalidation
"$AGENT" --agent-id bad --threads 1 --python-runner off --calibration off --qpu-sim off \
  --rendezvous-port-base $((BASE + 100)) --validation-fault matmul=fail >>"$WORK/bad.log" 2>&1 &
bad_pid=$!
PIDS+=("$bad_pid")
wait_for 60 agent_connected "$CLI" bad || fail "agent bad did not connect"
rc=0
"$CLI" validate --agents bad --tests matmul,memory_bandwidth,infer_mlp -o json >"$WORK/bad-validate.json" || rc=$?
[[ $rc == 3 ]] || fail "validate of the broken device exited $rc, not 3: $(cat "$WORK/bad-validate.json")"
jq -e '.validation.devices[] | select(.device_id == "cpu0") | .verdict == "VERDICT_FAIL" and (.reason | contains("wrong result"))' \
  "$WORK/bad-validate.json" >/dev/null || fail "the broken cpu0 is not FAIL: $(jq -c '.validation.devices' "$WORK/bad-validate.json")"
"$CLI" get agents -o json | jq -e '.agents[] | select(.agent_id == "bad") | .health[0] | .quarantined and .verdict == "VERDICT_FAIL"' >/dev/null ||
  fail "the broken device is not quarantined: $("$CLI" get agents -o json | jq -c '.agents[] | select(.agent_id == "bad")')"
cat >"$WORK/on-bad.yaml" <<'YAML'
models: [mlp]
batch_sizes: [64]
targets: [{device_kind: cpu, agent_id: bad}]
train: {min_steps: 5, warmup_steps: 1, min_duration_seconds: 0}
inference: {max_batches: 5}
YAML
waiting=$("$CLI" submit -f "$WORK/on-bad.yaml")
reason() { "$CLI" get job "$waiting" -o json | jq -r '.tasks[0].pending_reason // ""'; }
wait_for 20 bash -c "[[ \$('$CLI' get job $waiting -o json | jq -r '.tasks[0].pending_reason // \"\"') == *quarantined* ]]" ||
  fail "the job on the quarantined device does not wait for it: state $("$CLI" get job "$waiting" -o json | jq -c '[.state, .tasks[0].pending_reason]')"
echo "validate: pending reason: $(reason)"
[[ $(reason) == *"bad/cpu0 (FAIL in job-"* ]] || fail "the pending reason does not name the device and its verdict: $(reason)"
# Repaired: the agent again without the fault; a revalidation passes and releases the device.
kill "$bad_pid"
wait "$bad_pid" 2>/dev/null || true
"$AGENT" --agent-id bad --threads 1 --python-runner off --calibration off --qpu-sim off \
  --rendezvous-port-base $((BASE + 100)) >>"$WORK/bad.log" 2>&1 &
PIDS+=($!)
wait_for 60 agent_connected "$CLI" bad || fail "agent bad did not reconnect"
"$CLI" validate --agents bad --tests matmul,memory_bandwidth,infer_mlp >"$WORK/revalidate.out" 2>&1 || fail "the revalidation did not pass: $(cat "$WORK/revalidate.out")"
"$CLI" watch "$waiting" >/dev/null 2>&1 || true
[[ $("$CLI" get job "$waiting" -o json | jq -r '.state') == JOB_STATE_SUCCEEDED ]] ||
  fail "the job did not run after the device was released: $("$CLI" get job "$waiting" -o json | jq -c '[.state, .tasks[0].error]')"
[[ $("$CLI" get agents -o json | jq '[.agents[] | select(.agent_id == "bad") | .health[]?] | length') == 0 ]] ||
  fail "the released device still has a health entry"

# ---- the all-reduce between the two agents: one pair, a rank on each, measured on both
"$CLI" validate --device-kind cpu --tests allreduce -o json >"$WORK/pair.json" ||
  fail "the all-reduce pair did not pass: $(jq -c '.validation.devices' "$WORK/pair.json")"
pair=$(jq -r '.id' "$WORK/pair.json")
[[ $("$CLI" get job "$pair" -o json | jq '[.tasks[] | select(.gang.world_size == 2)] | length') == 2 ]] ||
  fail "the pair is not a gang of two tasks: $("$CLI" get job "$pair" -o json | jq -c '[.tasks[] | .gang]')"
for agent in good bad; do
  jq -e --arg a "$agent" '.validation.devices[] | select(.agent_id == $a) | .tests[] | select(.test == "allreduce") |
    .verdict == "VERDICT_PASS" and .value > 0' "$WORK/pair.json" >/dev/null ||
    fail "no all-reduce figure for $agent: $(jq -c '.validation.devices' "$WORK/pair.json")"
done
echo "validate: all-reduce good <-> bad (16 MiB, GB/s): $(jq -c '[.validation.devices[] | {(.agent_id): (.tests[] | select(.test == "allreduce") | .value)}] | add' "$WORK/pair.json")"
echo "validate: OK"
ok=1
