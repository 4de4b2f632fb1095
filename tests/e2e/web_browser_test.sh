#!/usr/bin/env bash
# A person logging into the web UI in headless Chromium (tests/e2e/web_browser.py, Selenium
# and chromium-driver from Debian): the coordinator over HTTPS with tokens on loopback, one
# queued job (no agent) to browse; refusals, the session cookie, browsing, logout; afterwards
# no token in the coordinator's log. SKIPPED (exit 77) when Chromium, chromedriver or Selenium
# is missing, with what the probe found.
# Usage: web_browser_test.sh SERVER CLI
set -euo pipefail
SERVER=$1 CLI=$2
HERE=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=lib.sh
source "$(dirname "$0")/lib.sh"
e2e_begin "web_browser"
cd "$WORK"
if ! probe=$(command -v chromium && command -v chromedriver && /usr/bin/python3 -c 'import selenium' 2>&1); then
  echo "SKIPPED: headless Chromium, chromedriver and python3-selenium are needed; the probe found: $probe"
  ok=1
  exit 77
fi
make_server_pki IP:127.0.0.1,DNS:localhost
make_tokens tokens
printf '%s\n' "$CLIENT_TOKEN" >client.tok
chmod 600 client.tok
"$SERVER" --listen 127.0.0.1:0 --metrics-listen '' --http-listen 127.0.0.1:0 --db "$WORK/jobs.db" \
  --tls-cert server.pem --tls-key server.key --token-file tokens --port-file "$WORK/ports" \
  >"$WORK/server.log" 2>&1 &
PIDS+=($!)
wait_for 20 test -s "$WORK/ports" || fail "the server did not start"
GRPC=127.0.0.1:$(sed -E 's/.*grpc=([0-9]+).*/\1/' "$WORK/ports")
WEB=https://127.0.0.1:$(sed -E 's/.*http=([0-9]+).*/\1/' "$WORK/ports")
JOB=$("$CLI" --server "$GRPC" --tls-ca ca.pem --token-file client.tok submit -m mlp -t cpu -b 32 \
  2>"$WORK/submit.err") || fail "no job submitted: $(head -c 300 "$WORK/submit.err")"
[[ -n $JOB ]] || fail "no job submitted: $(head -c 300 "$WORK/submit.err")"
/usr/bin/python3 "$HERE/web_browser.py" "$WEB" "$CLIENT_TOKEN" "$AGENT_TOKEN" "$JOB" "$WORK" ||
  fail "the browser session failed"
for t in "$CLIENT_TOKEN" "$AGENT_TOKEN"; do
  if grep -qF "$t" "$WORK/server.log"; then fail "a token is in the coordinator's log"; fi
done
echo "web browser: no token in the coordinator's log"
ok=1
