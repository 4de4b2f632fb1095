#!/usr/bin/env bash
# `repeats: N` with the real binaries on loopback:
#  - bad repeats refused at submit, naming the field, nothing stored;
#  - a job of two configurations (batch 32 and 64) with --repeats 2 has four
#    tasks in the order run 1 of each, then run 2 of each (A B A B), each
#    labelled with its run, and they ran in that order on the one device;
#  - each run records the agent's malloc settings;
#  - the effective spec says repeats: 2 (and 1 when not given), `get job -o yaml` too;
#  - compare of two such jobs compares runs as runs (2/2 a side, no note,
#    the variance pooled on one device, the machine probe compared)
#    and follows its schema; against a job of one run it says that the
#    verdict ignores run-to-run variance;
#  - with 12 more jobs of that configuration, compare learns the machine's
#    run-to-run spread from them (and says so), and --spread-jobs 0 does not;
#  - history has one row per job and configuration with its runs counted, and
#    its changes learn the spread from the other jobs too;
#  - ten single-run jobs that took turns on the device, compared as JOB,JOB,... sides, are compared couple
#    by couple, the couples' spread learned from the runs next to each other in the jobs above (SKIPPED, exit
#    77, when in 3 attempts the machine probe set runs aside in every phase);
#  - every job is judged valid however noisy (validity.max_iqr_over_median 100): this tests counting,
#    pairing and priors, not noise;
#  - the report labels every run.
# Usage: repeats_test.sh SERVER AGENT CLI SCHEMAS_DIR
set -euo pipefail
SERVER=$1 AGENT=$2 CLI=$3 SCHEMAS=$4
HERE=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=lib.sh
source "$HERE/lib.sh"
e2e_begin "repeats"
start_coordinator "$SERVER" "$CLI"
"$AGENT" --agent-id rep --threads 1 --qpu-sim off --python-runner off --calibration off >>"$WORK/agent.log" 2>&1 &
PIDS+=($!)
wait_for 60 agent_connected "$CLI" rep || fail "agent did not connect"

# Every job here is judged valid however noisy its steps (validity.max_iqr_over_median 100): what is tested is how
# runs are counted, paired and learned from, and a job with an INVALID run drops out of the priors; on a VM in its
# noisy state (2026-12-01 evening) most 10- and 40-step phases were INVALID (IQR/median 0.3) and the priors missing
# in 2 of 3 runs of this test alone. Noise judgements are the unit tests' (phase_validity).
printf 'validity:\n  max_iqr_over_median: 100\n' >"$WORK/lenient.yaml"

# ---- bad input: refused, nothing stored
short=(-f "$WORK/lenient.yaml" -m mlp --min-steps 10 --max-steps 10 --warmup-steps 2 --infer-max-batches 6 --min-duration 0)
for bad in 51 -1; do
  if "$CLI" submit "${short[@]}" --repeats "$bad" >"$WORK/bad.out" 2>&1; then fail "--repeats $bad accepted"; fi
  grep -qF "repeats = $bad: must be in [1, 50]" "$WORK/bad.out" || fail "the error does not name repeats: $(cat "$WORK/bad.out")"
done
if "$CLI" submit "${short[@]}" -b 8,16,32,64,128,256,512 --repeats 50 -m mlp,cnn,rnn >"$WORK/bad.out" 2>&1; then
  fail "3 models x 7 batch sizes x 50 repeats = 1050 tasks accepted"
fi
grep -qF "x repeats" "$WORK/bad.out" || fail "the task-count error does not count the repeats: $(cat "$WORK/bad.out")"
[[ $("$CLI" get jobs -o json | jq '.jobs | length') == 0 ]] || fail "a refused spec left a job behind"

# ---- two jobs of 2 configurations x 2 runs, one job of one run
jobs=()
for _ in 1 2; do
  jobs+=("$("$CLI" submit "${short[@]}" -b 32,64 --repeats 2 --name rep)") || fail "submit with --repeats failed"
done
single=$("$CLI" submit "${short[@]}" -b 32,64 --name single) || fail "submit without repeats failed"
wait_for 240 all_jobs_ended "$CLI" || fail "the jobs did not end"
"$CLI" get job "${jobs[0]}" -o json >"$WORK/job.json"
[[ $(jq -r '.state' "$WORK/job.json") == JOB_STATE_SUCCEEDED ]] || fail "the repeated job failed: $(jq -c '[.tasks[].error]' "$WORK/job.json")"
order=$(jq -r '[.tasks[] | "\(.batch_size):\(.run)"] | join(" ")' "$WORK/job.json")
# The agent started itself again with its malloc settings (agent/platform/malloc_arenas.h), and each run says so.
[[ $(jq -r '[.tasks[].result.environment.malloc] | unique | join("|")' "$WORK/job.json") == \
  "glibc malloc, one arena, mmap threshold 32 MiB, trim threshold 4 GiB (set by the agent)" ]] ||
  fail "the runs do not record the agent's malloc settings: $(jq -c '[.tasks[].result.environment.malloc]' "$WORK/job.json")"
[[ $order == "32:1 64:1 32:2 64:2" ]] || fail "tasks not interleaved run by run: $order"
jq -e '[.tasks[].started_unix_seconds] as $s | $s == ($s | sort)' "$WORK/job.json" >/dev/null ||
  fail "the runs did not start in task order: $(jq -c '[.tasks[].started_unix_seconds]' "$WORK/job.json")"
[[ $(jq -r '.spec.repeats' "$WORK/job.json") == 2 ]] || fail "the effective spec does not say repeats 2"
[[ $("$CLI" get job "$single" -o json | jq -r '.spec.repeats') == 1 ]] || fail "the default repeats is not stated as 1"
"$CLI" get job "${jobs[0]}" -o yaml >"$WORK/rerun.yaml"
grep -q "^repeats: 2" "$WORK/rerun.yaml" || fail "get job -o yaml lacks repeats"
echo "repeats: 2 configurations x 2 runs ran in order $order"

# ---- compare: runs as runs, then against one run
"$CLI" compare "${jobs[0]}" "${jobs[1]}" -o json >"$WORK/runs.json" || fail "compare of repeated jobs failed"
python3 "$HERE/validate_json.py" "$SCHEMAS/compare.v1.json" "$WORK/runs.json" >"$WORK/schema.txt" ||
  fail "compare -o json breaks its schema: $(cat "$WORK/schema.txt")"
[[ $(jq '.pairs | length' "$WORK/runs.json") == 4 ]] || fail "not 2 configurations x 2 phases: $(jq -c '[.pairs[].key]' "$WORK/runs.json")"
jq -e '.pairs | all(.runs_a == 2 and .runs_b == 2 and (has("note") | not))' "$WORK/runs.json" >/dev/null ||
  fail "the runs were not compared as runs: $(jq -c '[.pairs[] | [.runs_a, .runs_b, .note]]' "$WORK/runs.json")"
# One agent and device: the runs' variance pooled; every CPU run carries the machine probe, compared.
jq -e '.pairs | all(.variance == "pooled" and .machine_probe.ratio_b_over_a > 0)' "$WORK/runs.json" >/dev/null ||
  fail "not pooled, or no machine probe: $(jq -c '[.pairs[] | [.variance, .machine_probe]]' "$WORK/runs.json")"
"$CLI" compare "${jobs[0]}" "${jobs[1]}" | tee "$WORK/runs.txt" | grep -q " 2/2 " || fail "the table does not show 2/2 runs"
"$CLI" compare "${jobs[0]}" "$single" -o json >"$WORK/one.json" || fail "compare against one run failed"
jq -e '.pairs | all(.runs_b == 1 and (.note | test("ignores run-to-run variance")))' "$WORK/one.json" >/dev/null ||
  fail "against one run the note is missing: $(jq -c '[.pairs[] | [.runs_a, .runs_b, .note]]' "$WORK/one.json")"
"$CLI" compare "${jobs[0]}" "$single" | grep -q "repeats 3" || fail "the table does not say how to compare runs"
echo "compare of runs: $(jq -c '[.pairs[] | {phase, runs_a, runs_b, ratio, ci95, verdict}]' "$WORK/runs.json")"

# ---- the machine's run-to-run spread learned from other jobs: 12 more jobs of 2 runs at batch 32 on this agent
# (40 training steps and 12 jobs: from before the lenient validity above, when INVALID runs dropped jobs out.)
spread=(-f "$WORK/lenient.yaml" -m mlp --min-steps 40 --max-steps 40 --warmup-steps 2 --infer-max-batches 6 --min-duration 0)
for _ in 1 2 3 4 5 6 7 8 9 10 11 12; do
  "$CLI" submit "${spread[@]}" -b 32 --repeats 2 --name spread >/dev/null || fail "submit of a spread job failed"
done
wait_for 240 all_jobs_ended "$CLI" || fail "the spread jobs did not end"
"$CLI" compare "${jobs[0]}" "${jobs[1]}" -o json >"$WORK/spread.json" || fail "compare with other jobs failed"
python3 "$HERE/validate_json.py" "$SCHEMAS/compare.v1.json" "$WORK/spread.json" >"$WORK/schema.txt" ||
  fail "compare -o json with run_spread_prior breaks its schema: $(cat "$WORK/schema.txt")"
# Batch 32 learns from the other jobs' valid runs (8 needed; a job with an INVALID run drops out), batch 64
# has none; the sides themselves are not counted.
priors=$(jq -c '[.pairs[] | select(.key | test("batch 32")) | .run_spread_prior.other_jobs // 0]' "$WORK/spread.json")
jq -e '[.pairs[] | select(.key | test("batch 32")) | .run_spread_prior] | any(. != null and .other_jobs >= 8 and .other_jobs <= 12)' \
  "$WORK/spread.json" >/dev/null || fail "batch 32 did not learn from 8-12 other jobs: $priors"
jq -e '[.pairs[] | select(.key | test("batch 64")) | has("run_spread_prior")] | all(. == false)' "$WORK/spread.json" \
  >/dev/null || fail "batch 64 has no other jobs but claims a prior"
"$CLI" compare "${jobs[0]}" "${jobs[1]}" | grep -qE "(moderated by|beyond what) (8|9|10|11|12) other jobs'" ||
  fail "the table does not say the spread came from other jobs"
"$CLI" compare "${jobs[0]}" "${jobs[1]}" --spread-jobs 0 -o json | jq -e '.pairs | all(has("run_spread_prior") | not)' \
  >/dev/null || fail "--spread-jobs 0 still used other jobs"
echo "compare with other jobs' spread: $(jq -c '[.pairs[] | {key, phase, degrees_of_freedom, run_spread_prior}]' "$WORK/spread.json")"

# ---- history: a row per job and configuration, its runs counted
"$CLI" history --model mlp -o json >"$WORK/history.json" || fail "history failed"
python3 "$HERE/validate_json.py" "$SCHEMAS/history.v1.json" "$WORK/history.json" >"$WORK/schema.txt" ||
  fail "history -o json breaks its schema: $(cat "$WORK/schema.txt")"
runs=$(jq -r --arg j "${jobs[1]}" '[.rows[] | select(.job == $j) | .runs] | join(" ")' "$WORK/history.json")
[[ $runs == "2 2" ]] || fail "history of the repeated job: rows with runs '$runs', not '2 2'"
# The change from jobs[0] to jobs[1] learns the spread from the same other jobs as compare's train pair at
# batch 32 (when 8 of them had 2 VALID train runs), and says so.
train_prior=$(jq '[.pairs[] | select((.key | test("batch 32")) and .phase == "train") | .run_spread_prior.other_jobs // 0] | first' "$WORK/spread.json")
spread_note=$(jq -r --arg j "${jobs[1]}" '[.rows[] | select(.job == $j and .batch == 32) | .versus_previous.run_spread // ""] | first' "$WORK/history.json")
if ((train_prior >= 8)); then
  [[ $spread_note == *"other jobs"* ]] || fail "history's change does not say it used the other jobs' spread: '$spread_note'"
else
  [[ -z $spread_note ]] || fail "history claims a spread compare did not have: '$spread_note'"
fi

# ---- runs that took turns, paired: ten single-run jobs submitted at once run one after another on the one
# device, A B A B ...; compared as sides A1,...,A5 against B1,...,B5, each couple's difference is the unit, and
# the couples' spread is learned from the runs next to each other in the jobs above (2 runs each). Five couples,
# so that two or more are left when the machine probe sets a run or two aside. When it set runs aside in every
# phase (the VM in its noisy state: left out, or compared within machine states), nothing was paired and that is
# right; the turns are taken again, at most 3 times, and if pairing was never exercised the test ends SKIPPED (77)
# after its other checks, saying so.
paired_turns=0
for attempt in 1 2 3; do
  turns=()
  for _ in 1 2 3 4 5 6 7 8 9 10; do
    turns+=("$("$CLI" submit "${spread[@]}" -b 32 --name turn)") || fail "submit of a single-run job failed"
  done
  wait_for 240 all_jobs_ended "$CLI" || fail "the single-run jobs did not end"
  side_a="${turns[0]},${turns[2]},${turns[4]},${turns[6]},${turns[8]}"
  side_b="${turns[1]},${turns[3]},${turns[5]},${turns[7]},${turns[9]}"
  "$CLI" compare "$side_a" "$side_b" -o json >"$WORK/turns.json" || fail "compare of jobs that took turns failed"
  python3 "$HERE/validate_json.py" "$SCHEMAS/compare.v1.json" "$WORK/turns.json" >"$WORK/schema.txt" ||
    fail "compare -o json of paired runs breaks its schema: $(cat "$WORK/schema.txt")"
  # Each phase is paired, unless the machine probe set runs aside (left out, or compared within machine states).
  jq -e '[.pairs[] | (.variance == "paired" and (.paired_runs | length) >= 2 and .run_spread_prior.of == "paired differences")
          or (.machine_probe.runs_left_out // [] | length) > 0 or has("machine_probe") and (.machine_probe | has("within_states"))]
         | all' "$WORK/turns.json" >/dev/null ||
    fail "runs that took turns were not paired: $(jq -c '[.pairs[] | {phase, variance, paired_runs, run_spread_prior, machine_probe}]' "$WORK/turns.json")"
  if jq -e '[.pairs[] | .variance == "paired"] | any' "$WORK/turns.json" >/dev/null; then
    paired_turns=1
    break
  fi
  echo "runs that took turns, attempt $attempt: the machine probe set runs aside in every phase: $(jq -c '[.pairs[] | {phase, variance, machine_probe}]' "$WORK/turns.json")"
done
if ((paired_turns)); then
  "$CLI" compare "$side_a" "$side_b" |
    grep -q "runs paired by time (they took turns on one machine: A[0-9]-B[0-9]" || fail "the table does not say the runs were paired"
  echo "runs that took turns: $(jq -c '[.pairs[] | {phase, variance, paired_runs, degrees_of_freedom, run_spread_prior}]' "$WORK/turns.json")"
fi

# ---- the report labels every run
"$CLI" report "${jobs[0]}" >"$WORK/report.txt" || fail "report failed"
grep -q "run 2" "$WORK/report.txt" || fail "the report does not label the runs"
ok=1
if ((!paired_turns)); then
  echo "e2e repeats: SKIPPED: the other checks passed, but in 3 attempts the machine probe set runs that took turns aside in every phase, so pairing was not exercised"
  exit 77
fi
echo "e2e repeats: OK"
