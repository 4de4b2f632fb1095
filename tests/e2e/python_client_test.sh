#!/usr/bin/env bash
# The Python client (python/, package hetbench) as a user installs it:
# `pip install ./python` into a fresh venv with the system's site packages
# (offline: Debian's grpcio, protobuf and pandas; the API's modules generated
# from proto/ at install), then its pytest suite (python/tests) against the
# real coordinator and agent on loopback, and a second coordinator with
# bearer tokens.
# Usage: python_client_test.sh SERVER AGENT CLI
set -euo pipefail
SERVER=$1 AGENT=$2 CLI=$3
REPO=$(cd "$(dirname "$0")/../.." && pwd)
# shellcheck source=lib.sh
source "$(dirname "$0")/lib.sh"
e2e_begin "python_client"
start_coordinator "$SERVER" "$CLI"
"$AGENT" --agent-id py --threads 1 --qpu-sim off --python-runner off --calibration off >>"$WORK/agent.log" 2>&1 &
PIDS+=($!)
wait_for 60 agent_connected "$CLI" py || fail "agent did not connect"
make_tokens "$WORK/tokens"
"$SERVER" --listen 127.0.0.1:0 --metrics-listen '' --db "$WORK/tokens.db" --token-file "$WORK/tokens" \
  --port-file "$WORK/ports-t" >"$WORK/server-t.log" 2>&1 &
PIDS+=($!)
wait_for 20 test -s "$WORK/ports-t" || fail "the coordinator with tokens did not start"

# A copy of python/ (a build writes into its tree) installed as a user would.
cp -r "$REPO/python" "$WORK/python"
/usr/bin/python3 -m venv --system-site-packages "$WORK/venv"
HETBENCH_PROTO_DIR=$REPO/proto "$WORK/venv/bin/pip" install --quiet --no-build-isolation --no-index "$WORK/python" \
  >"$WORK/pip.log" 2>&1 || fail "pip install ./python failed: $(tail -5 "$WORK/pip.log")"
(cd "$WORK" && "$WORK/venv/bin/python" -c 'import hetbench, hetbench.v1.coordinator_pb2') ||
  fail "the installed package does not import"
HETBENCH_CLI=$CLI HETBENCH_TOKENS_SERVER=127.0.0.1:$(sed -E 's/grpc=([0-9]+).*/\1/' "$WORK/ports-t") \
  HETBENCH_CLIENT_TOKEN=$CLIENT_TOKEN HETBENCH_AGENT_TOKEN=$AGENT_TOKEN \
  "$WORK/venv/bin/python" -m pytest -q -p no:cacheprovider "$WORK/python/tests" 2>&1 | tee "$WORK/pytest.log" || true
grep -qE "^[0-9]+ passed" "$WORK/pytest.log" && ! grep -qE "failed|error" "$WORK/pytest.log" ||
  fail "the Python client's tests failed"
ok=1
