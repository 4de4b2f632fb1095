#!/usr/bin/env bash
# A real Prometheus (Debian's package) scrapes a coordinator that has run a
# job. Every PromQL expression of every shipped dashboard panel must return
# data through Prometheus' HTTP API, and every shipped rule must evaluate
# without error. Also: promtool checks the exposition, the config and the rules.
set -euo pipefail
SERVER=$1 AGENT=$2 CLI=$3 DEPLOY=$4
# shellcheck source=lib.sh
source "$(dirname "$0")/lib.sh"
e2e_begin "prometheus-test"

promtool check config "$DEPLOY/prometheus/prometheus.yml" >/dev/null || fail "promtool check config"
promtool check rules "$DEPLOY/prometheus/rules/hetbench.rules.yml" >/dev/null || fail "promtool check rules"
(cd "$DEPLOY/prometheus/rules" && promtool test rules hetbench.rules.test.yml) >"$WORK/promtool-test.log" 2>&1 ||
  fail "promtool test rules: $(cat "$WORK/promtool-test.log")"

"$SERVER" --listen 127.0.0.1:0 --metrics-listen 127.0.0.1:0 --db "$WORK/jobs.db" --port-file "$WORK/ports" \
  >"$WORK/server.log" 2>&1 &
PIDS+=($!)
wait_for 20 test -s "$WORK/ports" || fail "server did not start"
GRPC_PORT=$(sed -E 's/.*grpc=([0-9]+).*/\1/' "$WORK/ports")
METRICS_PORT=$(sed -E 's/.*metrics=([0-9]+).*/\1/' "$WORK/ports")
export HETBENCH_SERVER=127.0.0.1:$GRPC_PORT
"$AGENT" --agent-id prom-agent --threads 2 >"$WORK/agent.log" 2>&1 &
PIDS+=($!)
wait_for 30 sh -c "\"$CLI\" get agents | grep -q prom-agent" || fail "agent did not connect"
"$CLI" submit --wait -b 256 --warmup-steps 2 --min-steps 30 --min-duration 0 --infer-max-batches 5 \
  --cost cpu=0.34 >"$WORK/report.txt" 2>&1 || fail "job: $(cat "$WORK/report.txt")"
# A short serving run, for the dashboards' serving panels.
"$CLI" submit --wait -m null -b 4 --serve server --qps 500 --latency-bound-ms 20 --serve-duration 0.5 \
  --serve-min-queries 100 >"$WORK/serving.txt" 2>&1 || fail "serving job: $(cat "$WORK/serving.txt")"

curl -sf "http://127.0.0.1:$METRICS_PORT/metrics" >"$WORK/metrics.txt" || fail "/metrics"
promtool check metrics <"$WORK/metrics.txt" >"$WORK/promtool-metrics.log" 2>&1 \
  || fail "promtool check metrics: $(cat "$WORK/promtool-metrics.log")"

# Prometheus on a free loopback port, scraping every second, with the shipped rules.
cat >"$WORK/prometheus.yml" <<CONF
global:
  scrape_interval: 1s
  evaluation_interval: 1s
rule_files:
  - $DEPLOY/prometheus/rules/hetbench.rules.yml
scrape_configs:
  - job_name: hetbench
    static_configs:
      - targets: ["127.0.0.1:$METRICS_PORT"]
CONF
for attempt in 1 2 3 4 5; do
  PROM_PORT=$(ports_below_ephemeral 10000 1 20000)
  prometheus --config.file="$WORK/prometheus.yml" --storage.tsdb.path="$WORK/tsdb" \
    --web.listen-address="127.0.0.1:$PROM_PORT" >"$WORK/prometheus.log" 2>&1 &
  PROM_PID=$!
  PIDS+=($PROM_PID)
  if wait_for 30 curl -sf "http://127.0.0.1:$PROM_PORT/-/ready"; then break; fi
  kill -9 $PROM_PID 2>/dev/null || true
  [[ $attempt == 5 ]] && fail "prometheus did not start"
done
API="http://127.0.0.1:$PROM_PORT/api/v1"
query() { curl -sf --get "$API/query" --data-urlencode "query=$1"; }
# Enough scrapes for rate() and increase() to see two points.
scraped() { [[ $(query 'count_over_time(hetbench_build_info[1m])' | jq -r '.data.result[0].value[1] // 0') -ge 5 ]]; }
wait_for 60 scraped || fail "prometheus did not scrape the coordinator"

# Every dashboard expression, with Grafana's variables replaced as Grafana would.
fails=0 total=0
while IFS=$'\t' read -r dashboard title expr; do
  total=$((total + 1))
  q=${expr//\$__rate_interval/1m}
  q=${q//\$__range/5m}
  q=${q//\$model/.*}
  q=${q//\$device_kind/.*}
  q=${q//\$agent/.*}
  n=$(query "$q" | jq -r 'if .status == "success" then (.data.result | length) else -1 end' || echo -1)
  if [[ "$n" -le 0 ]]; then
    echo "no data: $dashboard / $title: $q"
    fails=$((fails + 1))
  fi
done < <(for f in "$DEPLOY"/grafana/dashboards/*.json; do
  jq -r --arg d "$(basename "$f")" '.panels[] | .title as $t | .targets[] | [$d, $t, .expr] | @tsv' "$f"
done)
echo "dashboard expressions with data: $((total - fails)) of $total"
[[ $fails == 0 && $total -gt 0 ]] || fail "$fails dashboard expressions returned no data"
# Dashboards use a datasource variable, never an import placeholder.
if grep -l 'DS_' "$DEPLOY"/grafana/dashboards/*.json; then fail "dashboard with a \${DS_...} import placeholder"; fi

# Every rule evaluated without error.
evaluated() {
  curl -sf "$API/rules" | jq -e '[.data.groups[].rules[] | .lastEvaluation] | all(. != "0001-01-01T00:00:00Z")' >/dev/null
}
wait_for 30 evaluated || fail "rules were not evaluated"
curl -sf "$API/rules" >"$WORK/rules.json"
bad=$(jq -r '.data.groups[].rules[] | select(.health != "ok") | "\(.name): \(.lastError)"' "$WORK/rules.json")
[[ -z "$bad" ]] || fail "rules with errors: $bad"
echo "rules evaluated ok: $(jq '[.data.groups[].rules[]] | length' "$WORK/rules.json")"
ok=1
