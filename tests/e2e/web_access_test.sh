#!/usr/bin/env bash
# Who may read the web UI, with the real server on loopback:
#  A. over HTTPS (the gRPC port's certificate) with bearer tokens: a Host
#     not among its names gets 421 (DNS rebinding guard), --http-allowed-host
#     adds one; no token gets 401; the login form takes a client token and
#     sets a session cookie (HttpOnly, Secure, SameSite=Strict) that reads
#     pages until logout; a wrong token 401, an agent's 403, a form posted
#     from another origin 403;
#  B. plain HTTP with tokens on loopback: the log and the login page warn that
#     a token crosses the network in the clear; 50 clients trickling their
#     headers do not lock out a reader (/jobs answered within 1 s); a method
#     other than GET/HEAD (and the login forms' POST) is not served;
#  C. tokens, no TLS, a non-loopback address: refused at start, saying how.
# Usage: web_access_test.sh SERVER
set -euo pipefail
SERVER=$1
# shellcheck source=lib.sh
source "$(dirname "$0")/lib.sh"
e2e_begin "web_access"
cd "$WORK"
make_server_pki IP:127.0.0.1,DNS:localhost,DNS:bench.lab
make_tokens tokens

# ---- A. HTTPS with tokens
"$SERVER" --listen 127.0.0.1:0 --metrics-listen '' --http-listen 127.0.0.1:0 --db "$WORK/a.db" \
  --tls-cert server.pem --tls-key server.key --token-file tokens --http-allowed-host bench.lab \
  --port-file "$WORK/ports-a" >"$WORK/server-a.log" 2>&1 &
PIDS+=($!)
wait_for 20 test -s "$WORK/ports-a" || fail "the HTTPS server did not start: $(cat "$WORK/server-a.log")"
PORT=$(sed -E 's/.*http=([0-9]+).*/\1/' "$WORK/ports-a")
WEB=https://127.0.0.1:$PORT
get() { curl -s --cacert ca.pem -o "$WORK/body" -w '%{http_code}' "$@"; }
[[ $(get "$WEB/jobs" -H 'Host: evil.example') == 421 ]] || fail "a foreign Host was served over HTTPS"
grep -q "not a name of this web UI" "$WORK/body" || fail "the 421 does not say why: $(head -c 300 "$WORK/body")"
[[ $(get --resolve "bench.lab:$PORT:127.0.0.1" "https://bench.lab:$PORT/jobs") == 401 ]] \
  || fail "an allowed name was not let through to the token check"
[[ $(get "$WEB/jobs") == 401 ]] || fail "a page was served without a token"
[[ $(get "$WEB/login") == 200 ]] || fail "the login form is not served"
grep -q 'name="token"' "$WORK/body" || fail "the login page has no token field"
if grep -q "plain HTTP" "$WORK/body"; then fail "the HTTPS login page warns about plain HTTP"; fi
[[ $(get -d "token=not-a-real-token-at-all" "$WEB/login") == 401 ]] || fail "a wrong token logged in"
if grep -q "not-a-real-token" "$WORK/body"; then fail "the login page echoes the token it was given"; fi
[[ $(get -d "token=$AGENT_TOKEN" "$WEB/login") == 403 ]] || fail "an agent's token logged in"
[[ $(get -H 'Origin: https://evil.example' -d "token=$CLIENT_TOKEN" "$WEB/login") == 403 ]] \
  || fail "a login posted from another origin was taken"
[[ $(get -c jar -D headers -d "token=$CLIENT_TOKEN" "$WEB/login") == 303 ]] || fail "a client token did not log in"
cookie=$(grep -i '^set-cookie:' headers) || fail "no session cookie"
for attr in HttpOnly Secure SameSite=Strict; do
  [[ $cookie == *"$attr"* ]] || fail "the session cookie lacks $attr: $cookie"
done
[[ $cookie != *"$CLIENT_TOKEN"* ]] || fail "the cookie holds the token"
[[ $(get -b jar "$WEB/jobs") == 200 ]] || fail "the session cookie does not read a page"
[[ $(get -b jar -H "Origin: $WEB" -d "" "$WEB/logout") == 303 ]] || fail "logout failed"
[[ $(get -b jar "$WEB/jobs") == 401 ]] || fail "the session outlived its logout"
[[ $(get -H "Authorization: Bearer $CLIENT_TOKEN" "$WEB/agents") == 200 ]] || fail "a bearer token was refused"
echo "web access: HTTPS, Host guard, login with a session cookie, logout, refusals"

# ---- B. plain HTTP with tokens, and slow clients
"$SERVER" --listen 127.0.0.1:0 --metrics-listen '' --http-listen 127.0.0.1:0 --db "$WORK/b.db" \
  --token-file tokens --port-file "$WORK/ports-b" >"$WORK/server-b.log" 2>&1 &
PIDS+=($!)
wait_for 20 test -s "$WORK/ports-b" || fail "the HTTP server did not start"
PORT=$(sed -E 's/.*http=([0-9]+).*/\1/' "$WORK/ports-b")
WEB=http://127.0.0.1:$PORT
grep -q "crosses the network in the clear" "$WORK/server-b.log" || fail "no warning about tokens over plain HTTP"
[[ $(get "$WEB/login") == 200 ]] && grep -q "This page is plain HTTP" "$WORK/body" || fail "the login page does not warn"
# 50 clients each sending a header byte a second, for 8 s at most
/usr/bin/python3 - "$PORT" <<'PY' &
import socket, sys, threading, time
port = int(sys.argv[1])
def trickle():
    s = socket.create_connection(("127.0.0.1", port))
    s.sendall(b"GET /agents HTTP/1.1\r\nHost: 127.0.0.1\r\n")
    for _ in range(8):
        try:
            s.sendall(b"X")
        except OSError:
            break
        time.sleep(1)
    s.close()
threads = [threading.Thread(target=trickle) for _ in range(50)]
for t in threads: t.start()
for t in threads: t.join()
PY
SLOW=$!
sleep 1.5
start=$(date +%s.%N)
[[ $(curl -s -o /dev/null -m 1 -w '%{http_code}' -H "Authorization: Bearer $CLIENT_TOKEN" "$WEB/jobs") == 200 ]] \
  || fail "50 slow clients kept /jobs from answering within 1 s"
took=$(awk -v a="$start" -v b="$(date +%s.%N)" 'BEGIN { printf "%.2f", b - a }')
wait "$SLOW" || true
for method in PUT DELETE; do
  code=$(curl -s -o /dev/null -w '%{http_code}' -X "$method" -H "Authorization: Bearer $CLIENT_TOKEN" "$WEB/jobs")
  [[ $code == 4* ]] || fail "$method /jobs answered $code"
done
echo "web access: plain HTTP warned; /jobs answered in ${took} s beside 50 trickling clients"

# ---- C. tokens without TLS on a non-loopback address: refused at start
if "$SERVER" --listen 127.0.0.1:0 --metrics-listen '' --http-listen 0.0.0.0:0 --db "$WORK/c.db" \
  --token-file tokens >"$WORK/server-c.log" 2>&1; then
  fail "plain HTTP with tokens on 0.0.0.0 started"
fi
grep -q "give --tls-cert and --tls-key" "$WORK/server-c.log" || fail "the refusal does not say how: $(tail -3 "$WORK/server-c.log")"
echo "web access: plain HTTP with tokens on 0.0.0.0 refused at start"
ok=1
