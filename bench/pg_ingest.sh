#!/usr/bin/env bash
# Ingest into PostgreSQL against SQLite in one bench run: bench_fleet's ingest (64 real-shaped agents,
# one connection each, the agent's window) against the coordinator on SQLite, then on a fresh
# PostgreSQL database, ROUNDS times (A B A B). Each PostgreSQL run also reads the CPU time of every
# postgres process (utime + stime, sampled every 0.2 s) and prints it per million samples
# acknowledged: the database's share of the 2 cores, which samples/s alone hides in this VM's noise.
# Prints each run's RESULT figures and, per round, PostgreSQL / SQLite (samples/s, and each run's
# ratio to its own bare sink), with the CPU per million samples of the coordinator (both stores) and
# of postgres, and last the rounds' medians.
# Then the database's floor: the last round's first 20,000 packed batches (rows and pieces, as
# the store wrote them) copied again into empty tables of the same layout, alone, by psql's \copy
# over the same connection kind, committed and checkpointed (each page then written as in the
# run), timed by the CPU of every postgres process. That is what PostgreSQL spends to store
# those bytes with nothing else running, per million samples; and from it, modeled, the most
# PostgreSQL / SQLite can be if both runs keep every core busy: a PostgreSQL run costs what a
# SQLite run costs a sample (at most the cores over its rate), less the SQLite coordinator's CPU,
# plus the PostgreSQL coordinator's and the floor (the medians of the rounds).
# ADMIN_URL: a database the bench may create and drop databases from (e.g.
# postgresql://postgres@127.0.0.1:25433/postgres); it uses hetbench_pg_ingest_bench on the same server.
# A fresh database each round: a table that has grown for days adds autovacuum's and analyze's work
# (seen at ~20% of the database's CPU with 165,000 batches stored), which this bench leaves out.
# Bounded: each run is bench_fleet's own (--seconds 10); the database is dropped at the end.
# Usage: bench/pg_ingest.sh BENCH_FLEET SERVER ADMIN_URL [ROUNDS=3] [PG_SERVER=SERVER]
set -euo pipefail
# shellcheck source=../tests/e2e/lib.sh
source "$(dirname "$0")/../tests/e2e/lib.sh"  # cpu_model
export PGOPTIONS="-c client_min_messages=warning"
FLEET=$1 SERVER=$2 ADMIN=$3 ROUNDS=${4:-3} PG_SERVER=${5:-$2}
DB=hetbench_pg_ingest_bench
# One at a time on this machine: two would drop each other's database, and share the cores.
exec 9>"${TMPDIR:-/tmp}/hetbench-pg-ingest.lock"
flock -n 9 || { echo "pg_ingest: another bench/pg_ingest.sh is running on this machine; wait for it" >&2; exit 1; }
URL="${ADMIN%/*}/$DB"
LOG=$(mktemp /tmp/hetbench-pg-ingest.XXXXXX)
FLOOR_DIR=$(mktemp -d /tmp/hetbench-pg-floor.XXXXXX)  # pg_floor's files (~100 MB)
trap 'rm -rf "$LOG" "$LOG.rounds" "$FLOOR_DIR"; psql -q -X "$ADMIN" -c "DROP DATABASE IF EXISTS $DB" >/dev/null 2>&1 || true' EXIT
field() { grep -oE "(^| )$1=[^ ]+" <<<"$2" | head -n 1 | cut -d= -f2; }
postgres_ticks() {  # the CPU ticks of every postgres process now, as "pid ticks kind" lines
  local p kind
  for p in $(pgrep -u postgres 2>/dev/null || pgrep -x postgres); do
    case $(tr '\0' ' ' 2>/dev/null <"/proc/$p/cmdline") in
      *autovacuum*) kind=autovacuum ;;
      *checkpointer* | *"background writer"* | *walwriter*) kind=writers ;;
      *) kind=backends ;;
    esac
    awk -v p="$p" -v k="$kind" '{print p, $14 + $15, k}' "/proc/$p/stat" 2>/dev/null || true
  done
}
# run SERVER [server args...]: bench_fleet's RESULT line, with postgres_ticks=N (the CPU every postgres
# process used during it) and postgres_ticks_backends, _autovacuum, _writers (checkpointer, background
# writer, WAL writer) splitting it. A process that starts during the run counts from its start.
run() {
  local server=$1
  shift
  declare -A first=() last=() kind_of=()
  local pid ticks kind
  while read -r pid ticks kind; do first[$pid]=$ticks; done < <(postgres_ticks)
  "$FLEET" --mode ingest --agents 64 --seconds 10 --server-binary "$server" "$@" >"$LOG" 2>&1 &
  local bench=$!
  while kill -0 "$bench" 2>/dev/null; do
    while read -r pid ticks kind; do
      last[$pid]=$ticks
      kind_of[$pid]=$kind
    done < <(postgres_ticks)
    sleep 0.2
  done
  wait "$bench" || { echo "pg_ingest: bench_fleet failed: $(tail -n 3 "$LOG")" >&2; exit 1; }
  declare -A by=([backends]=0 [autovacuum]=0 [writers]=0)
  for pid in "${!last[@]}"; do
    kind=${kind_of[$pid]}
    by[$kind]=$((by[$kind] + last[$pid] - ${first[$pid]:-0}))
  done
  echo "$(grep '^RESULT' "$LOG") postgres_ticks=$((by[backends] + by[autovacuum] + by[writers]))" \
    "postgres_ticks_backends=${by[backends]} postgres_ticks_autovacuum=${by[autovacuum]} postgres_ticks_writers=${by[writers]}"
}
# The database's floor (see the top): prints "samples batches bytes ticks" for the batches copied again.
pg_floor() {
  # A server binary from before schema 6 keeps every batch in its row: no packed batches to copy.
  [[ $(psql -X -At "$URL" -c "SELECT to_regclass('sample_groups') IS NOT NULL") == t ]] || return 0
  local dir=$FLOOR_DIR
  psql -q -X -v ON_ERROR_STOP=1 "$URL" >/dev/null <<SQL
CREATE TABLE floor_groups AS
  SELECT grp FROM (SELECT grp, sum(live) OVER (ORDER BY grp) AS upto FROM sample_groups) g WHERE upto <= 20000;
\copy (SELECT b.* FROM sample_batches b JOIN floor_groups USING (grp) ORDER BY grp, grp_offset) TO '$dir/rows' (FORMAT binary)
\copy (SELECT g.* FROM sample_groups g JOIN floor_groups USING (grp) ORDER BY grp) TO '$dir/groups' (FORMAT binary)
\copy (SELECT p.* FROM sample_pieces p JOIN floor_groups USING (grp) ORDER BY grp, idx) TO '$dir/pieces' (FORMAT binary)
CREATE TABLE floor_rows (LIKE sample_batches INCLUDING ALL);
CREATE TABLE floor_grps (LIKE sample_groups INCLUDING ALL);
CREATE TABLE floor_pieces (LIKE sample_pieces INCLUDING ALL);
ALTER TABLE floor_pieces ALTER COLUMN bytes SET STORAGE PLAIN;
-- Storing alone: no autovacuum of these tables during the count.
ALTER TABLE floor_rows SET (autovacuum_enabled = false);
ALTER TABLE floor_grps SET (autovacuum_enabled = false);
ALTER TABLE floor_pieces SET (autovacuum_enabled = false);
CREATE TRIGGER floor_rows_fenced BEFORE INSERT ON floor_rows FOR EACH ROW
  WHEN (current_setting('hetbench.fenced_epoch', true) IS DISTINCT FROM NEW.epoch::text) EXECUTE FUNCTION hetbench_check_epoch();
CREATE TRIGGER floor_grps_fenced BEFORE INSERT ON floor_grps FOR EACH ROW
  WHEN (current_setting('hetbench.fenced_epoch', true) IS DISTINCT FROM NEW.epoch::text) EXECUTE FUNCTION hetbench_check_epoch();
CHECKPOINT;
SQL
  # The CPU is read from inside the copying session (psql's \!), while its backend is alive.
  declare -f postgres_ticks >"$dir/ticks.sh"
  echo "postgres_ticks | awk '{ t += \$2 } END { print t + 0 }'" >>"$dir/ticks.sh"
  psql -q -X -v ON_ERROR_STOP=1 "$URL" >/dev/null <<SQL
\! bash $dir/ticks.sh >$dir/before
BEGIN;
SELECT hetbench_fence(epoch) FROM hetbench_leader;
\copy floor_rows FROM '$dir/rows' (FORMAT binary)
\copy floor_grps FROM '$dir/groups' (FORMAT binary)
\copy floor_pieces FROM '$dir/pieces' (FORMAT binary)
COMMIT;
CHECKPOINT;
\! bash $dir/ticks.sh >$dir/after
SQL
  echo "$(psql -X -At -F ' ' "$URL" -c "SELECT sum(sample_count), count(*), sum(grp_bytes) FROM floor_rows")" \
    "$(($(cat "$dir/after") - $(cat "$dir/before")))"
  rm -f "$dir"/*
}
echo "cpu: $(cpu_model), $(nproc) cores"
hz=$(getconf CLK_TCK)
floor=""
for round in $(seq "$ROUNDS"); do
  sqlite=$(run "$SERVER")
  psql -q -X "$ADMIN" -c "DROP DATABASE IF EXISTS $DB" -c "CREATE DATABASE $DB" >/dev/null
  pg=$(run "$PG_SERVER" --server-arg --db --server-arg "$URL")
  [[ $round != "$ROUNDS" ]] || floor=$(pg_floor)
  # The database's writes flushed before the next SQLite run, not during it.
  psql -q -X "$ADMIN" -c "DROP DATABASE $DB" -c "CHECKPOINT" >/dev/null
  for side in sqlite pg; do
    r=${!side}
    echo "round $round $side: $(field samples_per_second "$r") samples/s, $(field ratio_to_bare_sink "$r") of the" \
      "bare sink, coordinator $(field server_cpu_fraction "$r") cores" \
      "($(awk -v c="$(field server_cpu_fraction "$r")" -v s="$(field samples_per_second "$r")" \
        'BEGIN { printf "%.3f", c / (s / 1e6) }') s per million samples), exactly-once violations" \
      "$(field exactly_once_violations "$r")"
  done
  acked=$(field samples_acked "$pg")
  awk -v r="$round" -v s="$(field samples_per_second "$sqlite")" -v p="$(field samples_per_second "$pg")" \
    -v sb="$(field ratio_to_bare_sink "$sqlite")" -v pb="$(field ratio_to_bare_sink "$pg")" \
    -v t="$(field postgres_ticks "$pg")" -v tb="$(field postgres_ticks_backends "$pg")" \
    -v ta="$(field postgres_ticks_autovacuum "$pg")" -v tw="$(field postgres_ticks_writers "$pg")" \
    -v cs="$(field server_cpu_fraction "$sqlite")" -v cp="$(field server_cpu_fraction "$pg")" \
    -v hz="$hz" -v a="$acked" -v out="$LOG.rounds" 'BEGIN {
      m = hz * (a / 1e6)
      printf "round %d: PostgreSQL / SQLite %.2f (samples/s), %.2f (each against its bare sink); postgres CPU " \
             "%.3f s per million samples (backends %.3f, autovacuum %.3f, checkpointer and writers %.3f)\n",
             r, p / s, pb / sb, t / m, tb / m, ta / m, tw / m
      # The same three figures, unrounded, the SQLite rate, and the CPU per million samples of each coordinator.
      printf "%.17g %.17g %.17g %.17g %.17g %.17g\n", p / s, pb / sb, t / hz / (a / 1e6), s, cs / (s / 1e6),
             cp / (p / 1e6) >> out }'
done
# The rounds together: the median of each figure, and in how many rounds PostgreSQL reached 0.8 of SQLite.
awk -v floor="$floor" -v hz="$hz" -v cores="$(nproc)" '{ r[NR] = $1; b[NR] = $2; c[NR] = $3; sq[NR] = $4; cs[NR] = $5; cp[NR] = $6 }
     function median(v, n,   s, i, j, t) {
       for (i = 1; i <= n; ++i) s[i] = v[i]
       for (i = 1; i <= n; ++i) for (j = i + 1; j <= n; ++j) if (s[j] < s[i]) { t = s[i]; s[i] = s[j]; s[j] = t }
       return n % 2 ? s[(n + 1) / 2] : (s[n / 2] + s[n / 2 + 1]) / 2 }
     END { for (i = 1; i <= NR; ++i) if (r[i] >= 0.8) ++met
           printf "rounds %d: PostgreSQL / SQLite median %.2f (samples/s), %.2f (each against its bare sink), " \
                  "0.8 or more in %d of %d; postgres CPU median %.3f s per million samples\n",
                  NR, median(r, NR), median(b, NR), met, NR, median(c, NR)
           # The floor, and the most PostgreSQL / SQLite can be with it (modeled, see the top).
           if (split(floor, f, " ") < 4 || f[1] <= 0) {
             print "floor: not measured (the last PostgreSQL run stored no packed batches: a server from before schema 6?)"
             exit }
           p = f[4] / hz / (f[1] / 1e6); all = cores / (median(sq, NR) / 1e6)
           pg = all - median(cs, NR) + median(cp, NR) + p
           printf "floor: postgres storing %d batches of the last run (%d samples, %.1f MB) again alone: %.3f s " \
                  "of postgres CPU per million samples (%.2f ns a byte). Per million samples, medians: the SQLite " \
                  "runs at most %.3f s of CPU (%d cores / their rate), %.3f of it their coordinator; the " \
                  "coordinator of the PostgreSQL runs %.3f; so PostgreSQL / SQLite at most %.3f / %.3f = %.2f " \
                  "(modeled: every core busy in both runs)\n", f[2], f[1], f[3] / 1e6, p, f[4] / hz / f[3] * 1e9,
                  all, cores, median(cs, NR), median(cp, NR), all, pg, all / pg }' "$LOG.rounds"
