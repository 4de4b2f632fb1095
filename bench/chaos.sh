#!/usr/bin/env bash
# The long, randomized variant of tests/e2e/chaos_test.sh: ROUNDS coordinator
# kills (-9) at random moments during submits and ingest (default 40), after
# the agent-kill and agent-freeze checks. Prints what survived.
#   bench/chaos.sh [ROUNDS] [BUILD_DIR]
set -euo pipefail
cd "$(dirname "$0")/.."
ROUNDS=${1:-40}
B=${2:-build}
time tests/e2e/chaos_test.sh "$B/server/hetbench-server" "$B/agent/hetbench-agent" "$B/client/hetbench" "$ROUNDS" \
  | grep -E '^chaos'
