# Shared by the e2e scripts (sourced): a work directory, the processes to kill
# on exit, failure reports and polling.
#   e2e_begin NAME   sets WORK (kept on failure), PIDS, ok=0 and the exit trap
#   fail MESSAGE     prints it with the tail of every log in WORK and exits 1
#   wait_for SECONDS COMMAND...   polls until the command succeeds (1 if it never does)
#   agent_connected CLI ID        the agent is connected (not merely waiting to resume)
#   all_jobs_ended CLI            every job ended (succeeded or failed); the list left in WORK/jobs.json
#   start_coordinator SERVER CLI [FLAGS...]   a coordinator on loopback port PORT (picked once, kept for
#                                 restarts), HETBENCH_SERVER exported, its database in WORK; waits until
#                                 healthy; SERVER_PID set
#   ports_below_ephemeral LO N [HI]   a random first port of N consecutive ones at or above LO, below HI
#                    and the kernel's ephemeral range (ip_local_port_range), none held by a socket now (ss)
#                    (coordinators take 10000-19999, a gang's TCPStores 20000 up, so the two never meet):
#                    a port inside that range may be a client connection's local port at any moment (a
#                    gang's TCPStore failed to bind 50366 that way in CI)
#   cpu_model        the first CPU's model name with its family and model numbers ("AMD EPYC (family 26,
#                    model 2)", as bench::CpuModel prints it): a VM may name two different CPUs alike
e2e_begin() {
  E2E_NAME=$1
  WORK=$(mktemp -d "/tmp/hetbench-$1.XXXXXX")
  PIDS=()
  ok=0
  trap e2e_cleanup EXIT
}
e2e_cleanup() {
  for p in "${PIDS[@]}"; do kill -9 "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
  if [[ $ok == 1 ]]; then rm -rf "$WORK"; else echo "$E2E_NAME: logs kept in $WORK"; fi
}
fail() { echo "$E2E_NAME FAILED: $*"; tail -n 30 "$WORK"/*.log; exit 1; }
wait_for() {
  local deadline=$((SECONDS + $1)); shift
  until "$@" >/dev/null 2>&1; do ((SECONDS < deadline)) || return 1; sleep 0.1; done
}
agent_connected() {
  "$1" get agents -o json 2>/dev/null |
    jq -e --arg id "$2" '.agents[] | select(.agent_id == $id and (.resume_deadline_unix_seconds // 0) == 0)' >/dev/null
}
start_coordinator() {
  local server=$1 cli=$2
  shift 2
  : "${PORT:=$(ports_below_ephemeral 10000 1 20000)}"
  export HETBENCH_SERVER=127.0.0.1:$PORT
  "$server" --listen "127.0.0.1:$PORT" --metrics-listen "" --db "$WORK/jobs.db" "$@" >>"$WORK/server.log" 2>&1 &
  SERVER_PID=$!
  PIDS+=("$SERVER_PID")
  wait_for 20 "$cli" health || fail "server did not start"
}
all_jobs_ended() {
  "$1" get jobs --limit 0 -o json >"$WORK/jobs.json" 2>/dev/null &&
    [[ $(jq '[.jobs[] | select(.state != "JOB_STATE_SUCCEEDED" and .state != "JOB_STATE_FAILED")] | length' \
      "$WORK/jobs.json") == 0 ]]
}
# A throwaway CA (ca.pem, ca.key) and a server certificate (server.pem,
# server.key) for SAN in the current directory; `key` stays set for more.
make_server_pki() {  # make_server_pki SAN, e.g. IP:127.0.0.1
  key=(-newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes)
  openssl req -x509 "${key[@]}" -keyout ca.key -out ca.pem -days 2 -subj /CN=hetbench-e2e-ca 2>/dev/null
  echo "subjectAltName=$1" >san.ext
  openssl req "${key[@]}" -keyout server.key -out server.csr -subj /CN=coordinator 2>/dev/null
  openssl x509 -req -in server.csr -CA ca.pem -CAkey ca.key -CAcreateserial -out server.pem -days 2 \
    -extfile san.ext 2>/dev/null
  chmod 600 server.key
}
# A token file with one agent and one client token (AGENT_TOKEN, CLIENT_TOKEN).
make_tokens() {  # make_tokens FILE
  AGENT_TOKEN=$(openssl rand -hex 24)
  CLIENT_TOKEN=$(openssl rand -hex 24)
  printf 'agent %s\nclient %s\n' "$AGENT_TOKEN" "$CLIENT_TOKEN" >"$1"
  chmod 600 "$1"
}
ports_below_ephemeral() {  # ports_below_ephemeral LO N [HI]
  local lo=$1 n=$2 hi=32768 base
  [[ -r /proc/sys/net/ipv4/ip_local_port_range ]] && read -r hi _ </proc/sys/net/ipv4/ip_local_port_range
  [[ -n ${3:-} ]] && ((${3} < hi)) && hi=$3
  for _ in $(seq 50); do
    base=$((lo + RANDOM % (hi - lo - n)))
    # ss lists every socket's local address; none may end in a port of base..base+n-1.
    if ! command -v ss >/dev/null ||
      ! ss -Htan | awk -v b="$base" -v n="$n" '{ p = $4; sub(/.*:/, "", p); if (p >= b && p < b + n) f = 1 }
                                            END { exit !f }'; then
      echo "$base"
      return 0
    fi
  done
  echo "ports_below_ephemeral: no $n free ports in $lo..$hi" >&2
  return 1
}
cpu_model() {
  awk -F': ' '/^model name/ && n == "" { n = $2 } /^cpu family/ && f == "" { f = $2 }
              /^model[[:space:]]*:/ && m == "" { m = $2 }
              END { printf "%s (family %s, model %s)\n", n, f, m }' /proc/cpuinfo
}
