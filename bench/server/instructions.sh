#!/usr/bin/env bash
# User-space instructions per request of `erdma-webhook serve` and trivial_tls_server, counted by
# valgrind's callgrind: unlike time, an instruction count does not change when other work shares
# the machine. Each server runs twice under callgrind, answering N1 and then N2 requests (8
# keep-alive connections, POST of the body); the difference divided by N2-N1 is the cost of one
# request without start-up. Then prints where erdma-webhook's instructions go, by library and by
# function. Kernel work (syscalls, TCP) is not counted; both servers make the same calls per
# request except the log line's write(2).
#
# Usage: bench/server/instructions.sh [BODY]   (default bench/bodies/review-15k.json)
# Environment: N1 (500), N2 (2500); SKIP_BUILD=1 uses build/ as it is (no rebuild first).
set -euo pipefail
cd "$(dirname "$0")/../.."
body=${1:-bench/bodies/review-15k.json}
N1=${N1:-500}
N2=${N2:-2500}
command -v valgrind >/dev/null || { echo "instructions: needs valgrind (apt-get install valgrind)" >&2; exit 1; }
[ -n "${SKIP_BUILD:-}" ] || scripts/build.sh build >&2
work=$(mktemp -d /tmp/erdma-instructions.XXXXXX)
trap '[ -n "${KEEP:-}" ] || rm -rf "$work"' EXIT
certs/erdma-certs generate --dir "$work/certs" 2>/dev/null

# drive PORT COUNT: COUNT requests over 8 kept-alive TLS connections (Debian's python3).
drive() {
  /usr/bin/python3 - "$1" "$2" "$body" <<'EOF'
import http.client, ssl, sys, threading
port, count, body = int(sys.argv[1]), int(sys.argv[2]), open(sys.argv[3], "rb").read()
ctx = ssl.create_default_context()
ctx.check_hostname = False
ctx.verify_mode = ssl.CERT_NONE
failures = []
def client(n):
    c = http.client.HTTPSConnection("127.0.0.1", port, context=ctx, timeout=120)
    for _ in range(n):
        c.request("POST", "/mutate-pods?timeout=10s", body=body, headers={"Content-Type": "application/json"})
        r = c.getresponse()
        r.read()
        if r.status != 200:
            failures.append(r.status)
    c.close()
threads = [threading.Thread(target=client, args=(count // 8 + (1 if i < count % 8 else 0),)) for i in range(8)]
for t in threads: t.start()
for t in threads: t.join()
sys.exit(1 if failures else 0)
EOF
}

# measure NAME COUNT: total instructions of one server process answering COUNT requests.
measure() {
  local name=$1 count=$2 out="$work/$1-$2.cg" ports="$work/ports.json"
  rm -f "$ports"
  local cmd
  case $name in
    erdma-webhook) cmd=(build/webhook/erdma-webhook serve --threads 1 --listen 127.0.0.1:0 --metrics-listen 127.0.0.1:0
                        --port-file "$ports" --tls-cert "$work/certs/tls.crt" --tls-key "$work/certs/tls.key") ;;
    trivial-tls) cmd=(build/bench/server/trivial_tls_server "$work/certs/tls.crt" "$work/certs/tls.key" "$ports") ;;
  esac
  valgrind --tool=callgrind --callgrind-out-file="$out" "${cmd[@]}" 2>/dev/null &
  local pid=$!
  for _ in $(seq 600); do [ -s "$ports" ] && break; sleep 0.1; done
  [ -s "$ports" ] || { echo "instructions: $name did not start" >&2; exit 1; }
  drive "$(/usr/bin/python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["https"])' "$ports")" "$count"
  kill -TERM "$pid"
  wait "$pid" || true
  callgrind_annotate "$out" 2>/dev/null | awk '/PROGRAM TOTALS/ {gsub(",", "", $1); print $1}'
}

declare -A per
for name in erdma-webhook trivial-tls; do
  a=$(measure "$name" "$N1")
  b=$(measure "$name" "$N2")
  per[$name]=$(((b - a) / (N2 - N1)))
  echo "$name: $a instructions for $N1 requests, $b for $N2: ${per[$name]} per request" >&2
done
echo "| server | user-space instructions per request ($(basename "$body")) |"
echo "|---|---|"
echo "| erdma-webhook serve | ${per[erdma-webhook]} |"
echo "| trivial_tls_server | ${per[trivial-tls]} |"
echo
awk -v a="${per[erdma-webhook]}" -v t="${per[trivial-tls]}" \
  'BEGIN { printf "erdma-webhook / trivial = %.2f; difference %d instructions per request\n\n", a / t, a - t }'
echo "Where erdma-webhook's instructions go ($N2 requests, start-up included), by function (self cost):"
echo
echo '```'
callgrind_annotate --inclusive=no "$work/erdma-webhook-$N2.cg" 2>/dev/null |
  awk '/^ *[0-9,]+ \(/ && / \?\?\?:| [^ ]+:/ {print}' | head -30 |
  sed -E 's/\[[^]]*\]//' | cut -c1-150
echo '```'
