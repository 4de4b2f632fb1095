#!/usr/bin/env bash
# Serving runs with the real binaries on loopback: the harness alone (the
# null model) in the server scenario, mlp on cpu0 in the server scenario
# with a sweep of the batcher's largest batch, a rate sweep with its
# latency-throughput figure, a peak search, single_stream, multi_stream, and
# the generative decoder (tiny shapes) with TTFT/TPOT, a brought TorchScript
# decoder (and one whose vocabulary disagrees with the spec's); the
# report's serving table, -o json against the report schema, and bad input
# refused before anything runs. Latency figures are printed, not judged
# (a threshold would make the test depend on the machine's load): what is
# asserted is what must hold on any machine (counts, order, the seeded
# schedule's query count, the verdict's fields).
# Usage: serving_test.sh SERVER AGENT CLI SCHEMA
set -euo pipefail
SERVER=$1 AGENT=$2 CLI=$3 SCHEMA=$4
# shellcheck source=lib.sh
source "$(dirname "$0")/lib.sh"
e2e_begin "serving"
start_coordinator "$SERVER" "$CLI"
"$AGENT" --agent-id srv --threads 1 --qpu-sim off --python-runner off --calibration off >>"$WORK/agent.log" 2>&1 &
PIDS+=($!)
wait_for 60 agent_connected "$CLI" srv || fail "agent did not connect"

# ---- bad input: refused at submit, nothing stored
expect_refused() {  # expect_refused WHAT -- SUBMIT_FLAGS...
  local what=$1; shift 2
  if "$CLI" submit "$@" >"$WORK/bad.out" 2>&1; then fail "accepted: $*"; fi
  grep -qF -- "$what" "$WORK/bad.out" || fail "the error for '$*' does not say '$what': $(cat "$WORK/bad.out")"
}
expect_refused "serving.target_qps = 0: must be a finite number" -- -m mlp --serve server --latency-bound-ms 50
expect_refused "serving.target_qps = nan" -- -m mlp --serve server --qps nan --latency-bound-ms 50
expect_refused "serving.latency_bound_ms = 0: must be in (0, 3600000] for scenario server" -- -m mlp --serve server --qps 10
expect_refused "serving.scenario = 'burst': unknown" -- -m mlp --serve burst
expect_refused "models[0] = \"null\": a serving calibration model" -- -m null
[[ $("$CLI" get jobs -o json | jq '.jobs | length') == 0 ]] || fail "a refused spec left a job behind"

# ---- the harness alone: the null model at 2,000 queries/s, 1 s
job=$("$CLI" submit -m null -b 8 --serve server --qps 2000 --latency-bound-ms 10 --serve-duration 1 \
  --serve-min-queries 1000) || fail "submit null failed"
"$CLI" watch "$job" >/dev/null 2>&1 || true
"$CLI" get job "$job" -o json >"$WORK/null.json"
[[ $(jq -r '.state' "$WORK/null.json") == JOB_STATE_SUCCEEDED ]] || fail "the null run did not succeed: $(jq -c '.tasks[0].error' "$WORK/null.json")"
n=$(jq -r '.tasks[0].result.serving.queries_answered' "$WORK/null.json")
(( n >= 2000 - 300 && n <= 2000 + 400 )) || fail "the null run answered $n queries, not ~2000 (1 s at 2000/s)"
[[ $(jq -r '.tasks[0].result.phases[0].stats.count' "$WORK/null.json") == "$n" ]] || fail "not every query is a stored sample"
[[ $(jq -r '.tasks[0].result.serving.compute' "$WORK/null.json") == null* ]] || fail "the null run does not say what answered"
# The harness's own figures: CPU per query of the issuer and the batcher, the issuer's ceiling.
jq -e '.tasks[0].result.serving | .issuer_cpu_us_per_query > 0 and .batcher_cpu_us_per_query > 0
       and .issuer_ceiling_qps > 2000 and .issuer_ceiling_cpu_us_per_query > 0' "$WORK/null.json" >/dev/null \
  || fail "the null run lacks the harness's figures: $(jq -c '.tasks[0].result.serving | {issuer_cpu_us_per_query, batcher_cpu_us_per_query, issuer_ceiling_qps}' "$WORK/null.json")"
"$CLI" report "$job" | grep -q "harness CPU per query: issuer .* us, batcher .* us (the null model computes nothing); the issuer's ceiling here" \
  || fail "the null run's report does not state the harness's cost per query and the issuer's ceiling"
echo "serving: null harness: $(jq -c '.tasks[0].result.serving | {issuer_cpu_us_per_query, batcher_cpu_us_per_query, issuer_ceiling_qps, issuer_ceiling_cpu_us_per_query}' "$WORK/null.json")"
echo "serving: null model at 2000/s: $(jq -c '.tasks[0].result.serving | {achieved_qps, issue_delay_p99_ns, latency_p99_ns, early_stopping_ns}' "$WORK/null.json"); valid $(jq -c '.tasks[0].result.phases[0] | [.valid, .invalid_reasons]' "$WORK/null.json")"

# ---- runs compared as runs: the null run twice more, sides of two runs each
null_jobs=("$job")
for _ in 1 2; do
  null_jobs+=("$("$CLI" submit -m null -b 8 --serve server --qps 2000 --latency-bound-ms 10 --serve-duration 1 \
    --serve-min-queries 1000)") || fail "submit null again failed"
  "$CLI" watch "${null_jobs[-1]}" >/dev/null 2>&1 || true
done
"$CLI" compare "${null_jobs[0]},${null_jobs[1]}" "${null_jobs[2]},${null_jobs[1]}" -o json >"$WORK/runs.json" \
  || fail "compare of runs failed: $(cat "$WORK/runs.json")"
[[ $(jq -r '.pairs[0].runs_a, .pairs[0].runs_b, .pairs[0].phase' "$WORK/runs.json" | tr '\n' ' ') == "2 2 serve " ]] \
  || fail "compare of runs did not compare two runs a side: $(head -c 400 "$WORK/runs.json")"
[[ $(jq -r '.method.interval' "$WORK/runs.json") == *Welch* ]] || fail "compare of runs does not say its method"
# A serving run on the CPU carries the machine probe too, and compare compares it.
jq -e '.pairs[0].machine_probe.ratio_b_over_a > 0' "$WORK/runs.json" >/dev/null \
  || fail "the serving runs carry no machine probe: $(jq -c '.pairs[0].machine_probe' "$WORK/runs.json")"
/usr/bin/python3 "$(dirname "$0")/validate_json.py" "$(dirname "$SCHEMA")/compare.v1.json" "$WORK/runs.json" \
  || fail "compare of runs -o json does not match compare.v1.json"
# A side of one run against a side of runs: the first runs' queries, and the verdict says what it ignores.
"$CLI" compare "${null_jobs[0]},${null_jobs[1]}" "${null_jobs[2]}" -o json >"$WORK/mixed.json" 2>&1 ||
  fail "compare of runs against one run failed: $(head -c 400 "$WORK/mixed.json")"
jq -e '.pairs[0] | .runs_a == 2 and .runs_b == 1 and (.note | test("ignores run-to-run variance"))' \
  "$WORK/mixed.json" >/dev/null || fail "mixed sides: $(head -c 400 "$WORK/mixed.json")"
if "$CLI" compare "${null_jobs[0]}," "job-999999" >"$WORK/mixed.out" 2>&1; then fail "compare of an unknown job succeeded"; fi
echo "serving: null runs compared as runs: $(jq -c '.pairs[0] | {ratio, ci95, verdict}' "$WORK/runs.json")"

# ---- mlp on cpu0, server scenario, the batcher's largest batch swept (1 and 8)
job=$("$CLI" submit -m mlp -b 1,8 -t cpu --serve server --qps 200 --latency-bound-ms 100 --serve-duration 1 \
  --serve-min-queries 200) || fail "submit mlp failed"
"$CLI" watch "$job" >/dev/null 2>&1 || true
"$CLI" get job "$job" -o json >"$WORK/mlp.json"
[[ $(jq -r '.state' "$WORK/mlp.json") == JOB_STATE_SUCCEEDED ]] || fail "the mlp run did not succeed: $(jq -c '[.tasks[].error]' "$WORK/mlp.json")"
for t in 0 1; do
  s=".tasks[$t].result.serving"
  [[ $(jq -r "$s.scenario" "$WORK/mlp.json") == server ]] || fail "task $t: no server scenario"
  [[ $(jq -r "$s.exact" "$WORK/mlp.json") == true ]] || fail "task $t: percentiles not exact"
  p50=$(jq -r "$s.latency_p50_ns" "$WORK/mlp.json"); p99=$(jq -r "$s.latency_p99_ns" "$WORK/mlp.json")
  (( p50 > 0 && p50 <= p99 )) || fail "task $t: p50 $p50 ns, p99 $p99 ns"
  mb=$(jq -r "$s.mean_batch" "$WORK/mlp.json"); max=$(jq -r ".tasks[$t].batch_size" "$WORK/mlp.json")
  awk -v m="$mb" -v x="$max" 'BEGIN{exit !(m >= 1 && m <= x)}' || fail "task $t: mean batch $mb outside [1, $max]"
  [[ $(jq -r "$s.compute" "$WORK/mlp.json") == "mlp on cpu0 (LibTorch, eval mode, no autograd)" ]] \
    || fail "task $t: compute $(jq -r "$s.compute" "$WORK/mlp.json")"
done
/usr/bin/python3 "$(dirname "$0")/validate_json.py" "$SCHEMA" "$WORK/mlp.json" || fail "get job -o json does not match $SCHEMA"
"$CLI" report "$job" >"$WORK/report.txt" || fail "report failed"
grep -q "^Serving (latency from each query's scheduled time" "$WORK/report.txt" || fail "no serving table in the report"
grep -q "served by mlp on cpu0" "$WORK/report.txt" || fail "no serving footer in the report"
sed -n '/^Serving/,/^$/p' "$WORK/report.txt"
# the serving table alone, as CSV: a row per task, every figure unrounded
"$CLI" report "$job" --serving -o csv >"$WORK/serving.csv" || fail "report --serving -o csv failed"
head -1 "$WORK/serving.csv" | grep -q "^job_id,task_id,model,device_id,device_kind,max_batch,scenario,target_qps," \
  || fail "serving CSV header: $(head -1 "$WORK/serving.csv")"
[[ $(wc -l <"$WORK/serving.csv") == 3 ]] || fail "serving CSV: not a header and two rows"
# compare pairs serving tasks by scenario and rate, and compares their latencies
"$CLI" compare "$job" "$job" -o json >"$WORK/compare.json" || true
[[ $(jq -r '[.pairs[] | select(.phase == "serve")] | length' "$WORK/compare.json") == 2 ]] \
  || fail "compare did not compare the serve phases: $(head -c 400 "$WORK/compare.json")"
/usr/bin/python3 "$(dirname "$0")/validate_json.py" "$(dirname "$SCHEMA")/compare.v1.json" "$WORK/compare.json" \
  || fail "compare -o json does not match compare.v1.json"

# ---- a rate sweep (a task per rate) and its latency-throughput figure in the HTML report
job=$("$CLI" submit -m mlp -b 8 --serve server --qps 100,400 --latency-bound-ms 50 --serve-duration 0.5 \
  --serve-min-queries 64) || fail "submit the sweep failed"
"$CLI" watch "$job" >/dev/null 2>&1 || true
"$CLI" get job "$job" -o json >"$WORK/sweep.json"
[[ $(jq -r '[.tasks[].target_qps] | join(",")' "$WORK/sweep.json") == "100,400" ]] || fail "the sweep's tasks do not carry their rates"
[[ $(jq -r '[.tasks[].result.serving.target_qps] | join(",")' "$WORK/sweep.json") == "100,400" ]] \
  || fail "the agent did not run each task at its rate"
"$CLI" report "$job" --html "$WORK/sweep.html" >/dev/null || fail "report --html failed"
grep -q "Latency against load, mlp on srv/cpu0" "$WORK/sweep.html" || fail "no latency-throughput figure in the HTML report"

# ---- a peak search: the highest rate whose run is VALID, then a final run at it
echo "serving: {scenario: peak, percentile: 90, peak_max_runs: 8}" >"$WORK/peak.yaml"
job=$("$CLI" submit -f "$WORK/peak.yaml" -m mlp -b 1 --qps 1000 --latency-bound-ms 5 --serve-duration 0.3 \
  --serve-min-queries 64 --peak-precision 0.25) || fail "submit the peak search failed"
"$CLI" watch "$job" >/dev/null 2>&1 || true
"$CLI" get job "$job" -o json >"$WORK/peak.json"
[[ $(jq -r '.state' "$WORK/peak.json") == JOB_STATE_SUCCEEDED ]] || fail "the peak search did not succeed: $(jq -c '.tasks[0].error' "$WORK/peak.json")"
steps=$(jq -r '.tasks[0].result.serving.steps | length' "$WORK/peak.json")
(( steps >= 1 && steps <= 8 )) || fail "the peak search ran $steps runs (1 to 8 expected)"
[[ $(jq -r '.tasks[0].result.serving.steps[0].qps' "$WORK/peak.json") == 1000 ]] || fail "the search did not start at --qps"
peak=$(jq -r '.tasks[0].result.serving.peak_qps' "$WORK/peak.json")
best=$(jq -r '[.tasks[0].result.serving.steps[] | select(.valid) | .qps] | max // 0' "$WORK/peak.json")
[[ $peak == "$best" ]] || fail "peak_qps $peak is not the highest VALID run's rate $best"
if [[ $peak != 0 ]]; then
  [[ $(jq -r '.tasks[0].result.serving.target_qps' "$WORK/peak.json") == "$peak" ]] || fail "the final run is not at the peak"
fi
"$CLI" report "$job" >"$WORK/peak.txt"
grep -q "peak search (q/s" "$WORK/peak.txt" || fail "the report does not show the peak search"
echo "serving: peak search of mlp (b=1, p90 <= 5 ms): $(grep -o 'peak search.*' "$WORK/peak.txt")"

# ---- single_stream: one query at a time, the next when the last is answered
job=$("$CLI" submit -m mlp -b 4 --serve single_stream --serve-duration 0.5 --serve-min-queries 100) \
  || fail "submit single_stream failed"
"$CLI" watch "$job" >/dev/null 2>&1 || true
"$CLI" get job "$job" -o json >"$WORK/single.json"
[[ $(jq -r '.state' "$WORK/single.json") == JOB_STATE_SUCCEEDED ]] || fail "single_stream did not succeed"
[[ $(jq -r '.tasks[0].result.serving.mean_batch' "$WORK/single.json") == 1 ]] || fail "single_stream batched queries"
(( $(jq -r '.tasks[0].result.serving.queries_answered' "$WORK/single.json") >= 100 )) || fail "single_stream ran under its minimum"
echo "serving: single_stream p90 $(jq -r '.tasks[0].result.serving.latency_p90_ns' "$WORK/single.json") ns, estimate $(jq -r '.tasks[0].result.serving.early_stopping_ns' "$WORK/single.json") ns"

# ---- multi_stream: 8 samples a query, issued together, one query outstanding
job=$("$CLI" submit -m mlp -b 8 --serve multi_stream --samples-per-query 8 --serve-duration 0.3 \
  --serve-min-queries 100) || fail "submit multi_stream failed"
"$CLI" watch "$job" >/dev/null 2>&1 || true
"$CLI" get job "$job" -o json >"$WORK/multi.json"
[[ $(jq -r '.state' "$WORK/multi.json") == JOB_STATE_SUCCEEDED ]] || fail "multi_stream did not succeed"
s='.tasks[0].result.serving'
[[ $(jq -r "$s.samples_per_query" "$WORK/multi.json") == 8 ]] || fail "multi_stream: not 8 samples per query"
[[ $(jq -r "$s.mean_batch" "$WORK/multi.json") == 8 ]] || fail "multi_stream: a query's samples were not batched together"
q=$(jq -r "$s.queries_answered" "$WORK/multi.json")
[[ $(jq -r '.tasks[0].result.phases[0].stats.items' "$WORK/multi.json") == $((q * 8)) ]] \
  || fail "multi_stream: the serve phase does not count 8 samples per query"
/usr/bin/python3 "$(dirname "$0")/validate_json.py" "$SCHEMA" "$WORK/multi.json" || fail "multi_stream -o json does not match $SCHEMA"
"$CLI" report "$job" | grep -q "multi_stream x8" || fail "the serving table does not show multi_stream x8"
echo "serving: multi_stream x8 of mlp: p99 $(jq -r "$s.latency_p99_ns" "$WORK/multi.json") ns over $q queries"

# ---- the generative decoder (tiny shapes): a rate sweep with TTFT and TPOT SLOs
expect_refused "an SLO of a generative model" -- -m mlp --serve offline --ttft-ms 10
cat >"$WORK/decoder.yaml" <<'YAML'
serving:
  decoder: {layers: 2, width: 64, heads: 4, vocabulary: 1000, context: 40,
            prompt_tokens_min: 8, prompt_tokens_max: 32, output_tokens_min: 4, output_tokens_max: 16}
YAML
expect_refused "prompt_tokens_max + output_tokens_max = 48 tokens: beyond serving.decoder.context = 40" -- \
  -f "$WORK/decoder.yaml" -m decoder --serve offline
sed -i 's/context: 40/context: 128/' "$WORK/decoder.yaml"
job=$("$CLI" submit -f "$WORK/decoder.yaml" -m decoder -b 4 -t cpu --serve server --qps 20,40 --ttft-ms 2000 \
  --tpot-ms 500 --serve-duration 1 --serve-min-queries 64) || fail "submit the decoder failed"
"$CLI" watch "$job" >/dev/null 2>&1 || true
"$CLI" get job "$job" -o json >"$WORK/decoder.json"
[[ $(jq -r '.state' "$WORK/decoder.json") == JOB_STATE_SUCCEEDED ]] \
  || fail "the decoder run did not succeed: $(jq -c '[.tasks[].error]' "$WORK/decoder.json")"
for t in 0 1; do
  s=".tasks[$t].result.serving"
  n=$(jq -r "$s.queries_answered" "$WORK/decoder.json")
  (( n >= 64 )) || fail "decoder task $t answered $n requests (64 at least)"
  for phase in PHASE_SERVE PHASE_TTFT PHASE_TPOT; do
    [[ $(jq -r ".tasks[$t].result.phases[] | select(.phase == \"$phase\") | .stats.count" "$WORK/decoder.json") == "$n" ]] \
      || fail "decoder task $t: not one $phase sample per request"
  done
  g="$s.generative"
  ttft=$(jq -r "$g.ttft_p50_ns" "$WORK/decoder.json"); e2e=$(jq -r "$s.latency_p50_ns" "$WORK/decoder.json")
  (( ttft > 0 && ttft <= e2e )) || fail "decoder task $t: TTFT p50 $ttft ns, end-to-end p50 $e2e ns"
  (( $(jq -r "$g.tpot_p50_ns" "$WORK/decoder.json") > 0 )) || fail "decoder task $t: no TPOT"
  [[ $(jq -r "$g.output_tokens" "$WORK/decoder.json") == $(jq -r ".tasks[$t].result.phases[] | select(.phase == \"PHASE_SERVE\") | .stats.items" "$WORK/decoder.json") ]] \
    || fail "decoder task $t: the serve samples do not count the output tokens"
  (( $(jq -r "$g.max_running" "$WORK/decoder.json") <= 4 )) || fail "decoder task $t: more running than -b 4"
done
/usr/bin/python3 "$(dirname "$0")/validate_json.py" "$SCHEMA" "$WORK/decoder.json" || fail "decoder -o json does not match $SCHEMA"
"$CLI" report "$job" >"$WORK/decoder.txt" || fail "report of the decoder failed"
grep -q "^Generative (per request" "$WORK/decoder.txt" || fail "no generative table in the report"
grep -q "decoding steps" "$WORK/decoder.txt" || fail "no decoder footer in the report"
sed -n '/^Generative/,/^$/p' "$WORK/decoder.txt"
"$CLI" report "$job" --html "$WORK/decoder.html" >/dev/null || fail "report --html of the decoder failed"
grep -q "TTFT and TPOT against load, decoder on srv/cpu0" "$WORK/decoder.html" || fail "no TTFT/TPOT figure in the HTML report"
"$CLI" compare "$job" "$job" -o json >"$WORK/decoder-compare.json" || true
[[ $(jq -r '[.pairs[] | select(.phase == "ttft")] | length' "$WORK/decoder-compare.json") == 2 ]] \
  || fail "compare did not compare the TTFT phases: $(head -c 400 "$WORK/decoder-compare.json")"

# ---- a brought decoder: the TorchScript module scripts/decoder_torchscript.py writes, in place of the built-in
/usr/bin/python3 "$(dirname "$0")/../../scripts/decoder_torchscript.py" "$WORK/gpt.pt" --context 128 \
  --vocabulary 500 >/dev/null || fail "scripting the example decoder failed"
cat >"$WORK/brought.yaml" <<YAML
serving:
  decoder: {torchscript: $WORK/gpt.pt, context: 128, vocabulary: 500, prompt_tokens_max: 24, output_tokens_max: 12}
YAML
sed 's/context: 128/layers: 2, context: 128/' "$WORK/brought.yaml" >"$WORK/brought-layers.yaml"
expect_refused "serving.decoder.layers: the brought module states its own" -- -f "$WORK/brought-layers.yaml" \
  -m decoder --serve offline
job=$("$CLI" submit -f "$WORK/brought.yaml" -m decoder -b 4 -t cpu --serve offline --serve-duration 1 \
  --serve-min-queries 64) || fail "submit the brought decoder failed"
"$CLI" watch "$job" >/dev/null 2>&1 || true
"$CLI" get job "$job" -o json >"$WORK/brought.json"
[[ $(jq -r '.state' "$WORK/brought.json") == JOB_STATE_SUCCEEDED ]] \
  || fail "the brought decoder did not succeed: $(jq -c '[.tasks[].error]' "$WORK/brought.json")"
(( $(jq -r '.tasks[0].result.serving.queries_answered' "$WORK/brought.json") >= 64 )) || fail "brought decoder: too few requests"
jq -r '.tasks[0].result.serving.generative.decoder' "$WORK/brought.json" \
  | grep -q "^torchscript __torch__.Decoder (file hash [0-9a-f]*): 2 layers, width 64, 4 heads, vocabulary 500, context 128" \
  || fail "brought decoder: $(jq -r '.tasks[0].result.serving.generative.decoder' "$WORK/brought.json")"
echo "brought decoder: $(jq -r '.tasks[0].result.serving.generative.decoder' "$WORK/brought.json")"
# The spec's vocabulary disagrees with the module's: the task fails at once, naming the field and the fix.
sed -i 's/vocabulary: 500/vocabulary: 600/' "$WORK/brought.yaml"
job=$("$CLI" submit -f "$WORK/brought.yaml" -m decoder -b 4 -t cpu --serve offline) || fail "submit failed"
"$CLI" watch "$job" >/dev/null 2>&1 || true
"$CLI" get job "$job" -o json >"$WORK/brought-bad.json"
[[ $(jq -r '.state' "$WORK/brought-bad.json") == JOB_STATE_FAILED ]] || fail "a disagreeing vocabulary did not fail the job"
jq -r '.tasks[0].error' "$WORK/brought-bad.json" \
  | grep -qF "serving.decoder.vocabulary = 600: the brought module's vocabulary is 500; set it to 500" \
  || fail "the disagreeing vocabulary's error: $(jq -r '.tasks[0].error' "$WORK/brought-bad.json")"
ok=1
