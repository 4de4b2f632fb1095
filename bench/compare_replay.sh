#!/bin/bash
# bench_compare's --replay judges the runs of a --dump file again: on the
# file this build just took, it must give the verdicts the run gave (the
# same method on the same runs), and refuse a file that is not a dump.
# Usage: compare_replay.sh BENCH_COMPARE
set -euo pipefail
bench=$1
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
shape=(--steps 30 --infer-batches 10)
"$bench" --pairs 2 --runs 3 "${shape[@]}" --dump "$dir/runs.csv" > "$dir/taken.out"
"$bench" --replay "$dir/runs.csv" "${shape[@]}" > "$dir/replayed.out"
grep -q "^replayed from $dir/runs.csv (2 pairs, 3 run(s) per side" "$dir/replayed.out"
grep -q "^RESULT .* run_shape=replayed " "$dir/replayed.out"
# Each comparison's kind, pair, phase and verdict, and the counts, as taken.
verdicts() { awk '/^A\/[AB] / {print $1, $2, $3, $8, $9, $10}' "$1"; }
diff <(verdicts "$dir/taken.out") <(verdicts "$dir/replayed.out")
[ "$(verdicts "$dir/taken.out" | wc -l)" -eq 8 ]
counts() { grep "^RESULT " "$1" | sed 's/ run_shape=[a-z_]*//'; }
diff <(counts "$dir/taken.out") <(counts "$dir/replayed.out")
# Replayed in another order than it was taken: refused, exit 2.
if "$bench" --replay "$dir/runs.csv" "${shape[@]}" --order apart > /dev/null 2> "$dir/err"; then exit 1; else [ $? -eq 2 ]; fi
grep -q "runs were not where --order apart expects them" "$dir/err"
# Not a dump: a precise error, exit 2.
printf 'kind,pair,side,run,phase,ns_per_sample,probe_before_ns,probe_after_ns\nAA,0,A,one,train,1,2,3\n' > "$dir/bad.csv"
if "$bench" --replay "$dir/bad.csv" 2> "$dir/err"; then exit 1; else [ $? -eq 2 ]; fi
grep -q "line 2: not kind,pair,side,run,phase" "$dir/err"
echo "replay gave the run's verdicts"
