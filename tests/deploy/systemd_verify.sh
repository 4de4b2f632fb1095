#!/usr/bin/env bash
# Checks every systemd unit in deploy/systemd with `systemd-analyze verify`:
# the units with their ExecStart pointed at the binaries just built (verify
# also checks that the command exists), and nothing printed: an unknown key,
# which systemd only warns about, fails the check too.
# Usage: systemd_verify.sh DEPLOY_DIR SERVER AGENT
set -euo pipefail
DEPLOY=$1 SERVER=$2 AGENT=$3
WORK=$(mktemp -d /tmp/hetbench-systemd.XXXXXX)
trap 'rm -rf "$WORK"' EXIT
for unit in "$DEPLOY"/systemd/*.service; do
  sed -e "s|/usr/bin/hetbench-server|$SERVER|g; s|/usr/bin/hetbench-agent|$AGENT|g" "$unit" >"$WORK/$(basename "$unit")"
done
if ! out=$(systemd-analyze verify "$WORK"/*.service 2>&1) || [[ -n $out ]]; then
  echo "systemd-analyze verify: ${out:-failed}"
  exit 1
fi
echo "systemd-analyze verify: $(ls "$WORK" | tr '\n' ' ')clean"
