#!/usr/bin/env bash
# The real binaries with TLS, mutual TLS for agents and bearer tokens: an
# agent with its certificate and agent token connects, a client with a client
# token runs a job, wrong roles are refused, and no token appears in the
# coordinator's or agent's logs or in /metrics.
set -euo pipefail
SERVER=$1 AGENT=$2 CLI=$3
# shellcheck source=lib.sh
source "$(dirname "$0")/lib.sh"
e2e_begin "security-e2e"

cd "$WORK"
make_server_pki IP:127.0.0.1
openssl req "${key[@]}" -keyout agent.key -out agent.csr -subj /CN=sec-agent 2>/dev/null
openssl x509 -req -in agent.csr -CA ca.pem -CAkey ca.key -CAcreateserial -out agent.pem -days 2 2>/dev/null
make_tokens tokens
echo "$AGENT_TOKEN" >agent.tok
echo "$CLIENT_TOKEN" >client.tok
chmod 600 ./*.key tokens ./*.tok

"$SERVER" --listen 127.0.0.1:0 --metrics-listen 127.0.0.1:0 --db jobs.db --port-file ports \
  --tls-cert server.pem --tls-key server.key --tls-client-ca ca.pem --require-agent-cert --token-file tokens \
  >server.log 2>&1 &
PIDS+=($!)
wait_for 20 test -s ports || fail "server did not start"
GRPC=127.0.0.1:$(sed -E 's/.*grpc=([0-9]+).*/\1/' ports)
METRICS_PORT=$(sed -E 's/.*metrics=([0-9]+).*/\1/' ports)
grep -q "TLS, client certificates verified and required of agents; bearer tokens: 1 agent, 1 client" server.log \
  || fail "server does not say how it is protected"

"$AGENT" --server "$GRPC" --agent-id sec-agent --threads 2 --python-runner off --calibration off \
  --tls-ca ca.pem --tls-cert agent.pem --tls-key agent.key --token-file agent.tok >agent.log 2>&1 &
PIDS+=($!)
client=("$CLI" --server "$GRPC" --tls-ca ca.pem --token-file client.tok)
wait_for 30 sh -c "$(printf '%q ' "${client[@]}") get agents | grep -q sec-agent" || fail "agent did not connect over mTLS"
"${client[@]}" submit --wait -b 128 --warmup-steps 2 --min-steps 20 --min-duration 0 --infer-max-batches 3 \
  >report.txt 2>&1 || fail "job over TLS: $(cat report.txt)"
grep -q "succeeded" report.txt || fail "job did not succeed"

# The agent's token may not use the client API; no token may not either.
if "$CLI" --server "$GRPC" --tls-ca ca.pem --token-file agent.tok get jobs >wrong.txt 2>&1; then fail "agent token listed jobs"; fi
grep -q "a token of role agent may not call the client API" wrong.txt || fail "wrong-role message: $(cat wrong.txt)"
if "$CLI" --server "$GRPC" --tls-ca ca.pem get jobs >none.txt 2>&1; then fail "no token listed jobs"; fi
grep -q "no bearer token" none.txt || fail "missing-token message: $(cat none.txt)"
# An agent without its certificate is refused.
"$AGENT" --server "$GRPC" --agent-id no-cert --python-runner off --qpu-sim off --calibration off --tls-ca ca.pem \
  --token-file agent.tok >agent-nocert.log 2>&1 &
NOCERT=$!
PIDS+=("$NOCERT")
wait_for 20 grep -q "client certificate" agent-nocert.log || fail "agent without certificate not told why"
kill "$NOCERT"
"${client[@]}" get agents >agents.txt
if grep -q no-cert agents.txt; then fail "an agent without certificate got in"; fi

curl -sf "http://127.0.0.1:$METRICS_PORT/metrics" >metrics.txt || fail "/metrics"
for t in "$AGENT_TOKEN" "$CLIENT_TOKEN"; do
  if grep -q "$t" server.log agent.log agent-nocert.log metrics.txt report.txt wrong.txt none.txt; then
    fail "a token appears in logs or metrics"
  fi
done
grep -q 'hetbench_grpc_server_handled_total{code="PERMISSION_DENIED",method="ListJobs"}' metrics.txt \
  || fail "refusals are not counted in /metrics"
ok=1
echo "security e2e: mTLS agent connected, job ran over TLS, wrong role and missing token refused, no token leaked"
