#!/usr/bin/env bash
# The Python client for notebooks (client/python/hetbench_client) against the
# real coordinator and agent on loopback: tests/python/test_client.py.
# Usage: python_client_test.sh SERVER AGENT CLI PYTHONPATH_DIR
set -euo pipefail
SERVER=$1 AGENT=$2 CLI=$3 PYDIR=$4
# shellcheck source=lib.sh
source "$(dirname "$0")/lib.sh"
e2e_begin "python_client"
start_coordinator "$SERVER" "$CLI"
"$AGENT" --agent-id py --threads 1 --qpu-sim off --python-runner off --calibration off >>"$WORK/agent.log" 2>&1 &
PIDS+=($!)
wait_for 60 agent_connected "$CLI" py || fail "agent did not connect"
HETBENCH_CLI=$CLI PYTHONPATH=$PYDIR /usr/bin/python3 "$(dirname "$0")/../python/test_client.py" 2>&1 |
  tee "$WORK/python.log" || true
grep -q "^OK" "$WORK/python.log" || fail "the Python client's tests failed"
ok=1
