#!/usr/bin/env bash
# Ingest into PostgreSQL against SQLite in one bench run: bench_fleet's ingest (64 real-shaped agents,
# one connection each, the agent's window) against the coordinator on SQLite, then on a fresh
# PostgreSQL database, ROUNDS times (A B A B). Each PostgreSQL run also reads the CPU time of every
# postgres process (utime + stime, sampled every 0.2 s) and prints it per million samples
# acknowledged: the database's share of the 2 cores, which samples/s alone hides in this VM's noise.
# Prints each run's RESULT figures and, per round, PostgreSQL / SQLite (samples/s, and each run's
# ratio to its own bare sink), with the CPU, and last the rounds' medians.
# ADMIN_URL: a database the bench may create and drop databases from (e.g.
# postgresql://postgres@127.0.0.1:25433/postgres); it uses hetbench_pg_ingest_bench on the same server.
# A fresh database each round: a table that has grown for days adds autovacuum's and analyze's work
# (seen at ~20% of the database's CPU with 165,000 batches stored), which this bench leaves out.
# Bounded: each run is bench_fleet's own (--seconds 10); the database is dropped at the end.
# Usage: bench/pg_ingest.sh BENCH_FLEET SERVER ADMIN_URL [ROUNDS=3] [PG_SERVER=SERVER]
set -euo pipefail
export PGOPTIONS="-c client_min_messages=warning"
FLEET=$1 SERVER=$2 ADMIN=$3 ROUNDS=${4:-3} PG_SERVER=${5:-$2}
DB=hetbench_pg_ingest_bench
# One at a time on this machine: two would drop each other's database, and share the cores.
exec 9>"${TMPDIR:-/tmp}/hetbench-pg-ingest.lock"
flock -n 9 || { echo "pg_ingest: another bench/pg_ingest.sh is running on this machine; wait for it" >&2; exit 1; }
URL="${ADMIN%/*}/$DB"
LOG=$(mktemp /tmp/hetbench-pg-ingest.XXXXXX)
trap 'rm -f "$LOG" "$LOG.rounds"; psql -q -X "$ADMIN" -c "DROP DATABASE IF EXISTS $DB" >/dev/null 2>&1 || true' EXIT
field() { grep -oE "(^| )$1=[^ ]+" <<<"$2" | head -n 1 | cut -d= -f2; }
postgres_ticks() {  # the CPU ticks of every postgres process now, as "pid ticks" lines
  local p
  for p in $(pgrep -u postgres 2>/dev/null || pgrep -x postgres); do
    awk -v p="$p" '{print p, $14 + $15}' "/proc/$p/stat" 2>/dev/null || true
  done
}
run() {  # run SERVER [server args...]: bench_fleet's RESULT line, with postgres_ticks=N (postgres CPU used)
  local server=$1
  shift
  declare -A first=() last=()
  "$FLEET" --mode ingest --agents 64 --seconds 10 --server-binary "$server" "$@" >"$LOG" 2>&1 &
  local bench=$! pid ticks
  while kill -0 "$bench" 2>/dev/null; do
    while read -r pid ticks; do
      [[ -n ${first[$pid]:-} ]] || first[$pid]=$ticks
      last[$pid]=$ticks
    done < <(postgres_ticks)
    sleep 0.2
  done
  wait "$bench" || { echo "pg_ingest: bench_fleet failed: $(tail -n 3 "$LOG")" >&2; exit 1; }
  ticks=0
  for pid in "${!last[@]}"; do ticks=$((ticks + last[$pid] - first[$pid])); done
  echo "$(grep '^RESULT' "$LOG") postgres_ticks=$ticks"
}
echo "cpu: $(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | head -n 1), $(nproc) cores"
hz=$(getconf CLK_TCK)
for round in $(seq "$ROUNDS"); do
  sqlite=$(run "$SERVER")
  psql -q -X "$ADMIN" -c "DROP DATABASE IF EXISTS $DB" -c "CREATE DATABASE $DB" >/dev/null
  pg=$(run "$PG_SERVER" --server-arg --db --server-arg "$URL")
  # The database's writes flushed before the next SQLite run, not during it.
  psql -q -X "$ADMIN" -c "DROP DATABASE $DB" -c "CHECKPOINT" >/dev/null
  for side in sqlite pg; do
    r=${!side}
    echo "round $round $side: $(field samples_per_second "$r") samples/s, $(field ratio_to_bare_sink "$r") of the" \
      "bare sink, coordinator $(field server_cpu_fraction "$r") cores, exactly-once violations" \
      "$(field exactly_once_violations "$r")"
  done
  acked=$(field samples_acked "$pg")
  awk -v r="$round" -v s="$(field samples_per_second "$sqlite")" -v p="$(field samples_per_second "$pg")" \
    -v sb="$(field ratio_to_bare_sink "$sqlite")" -v pb="$(field ratio_to_bare_sink "$pg")" \
    -v t="$(field postgres_ticks "$pg")" -v hz="$hz" -v a="$acked" -v out="$LOG.rounds" 'BEGIN {
      printf "round %d: PostgreSQL / SQLite %.2f (samples/s), %.2f (each against its bare sink); " \
             "postgres CPU %.3f s per million samples\n", r, p / s, pb / sb, t / hz / (a / 1e6)
      # The same three figures, unrounded, for the summary below.
      printf "%.17g %.17g %.17g\n", p / s, pb / sb, t / hz / (a / 1e6) >> out }'
done
# The rounds together: the median of each figure, and in how many rounds PostgreSQL reached 0.8 of SQLite.
awk '{ r[NR] = $1; b[NR] = $2; c[NR] = $3 }
     function median(v, n,   s, i, j, t) {
       for (i = 1; i <= n; ++i) s[i] = v[i]
       for (i = 1; i <= n; ++i) for (j = i + 1; j <= n; ++j) if (s[j] < s[i]) { t = s[i]; s[i] = s[j]; s[j] = t }
       return n % 2 ? s[(n + 1) / 2] : (s[n / 2] + s[n / 2 + 1]) / 2 }
     END { for (i = 1; i <= NR; ++i) if (r[i] >= 0.8) ++met
           printf "rounds %d: PostgreSQL / SQLite median %.2f (samples/s), %.2f (each against its bare sink), " \
                  "0.8 or more in %d of %d; postgres CPU median %.3f s per million samples\n",
                  NR, median(r, NR), median(b, NR), met, NR, median(c, NR) }' "$LOG.rounds"
