#!/usr/bin/env bash
# Load benchmark of the HTTPS admission server: `erdma-webhook serve` beside trivial_tls_server
# (same Beast/OpenSSL stack and TLS settings, constant 200), each pinned to one core, driven by
# wrk on the other core over HTTPS/1.1 keep-alive, POSTing the AdmissionReviews in bench/bodies/.
# Per run: requests/s, latency percentiles (wrk), server CPU per request (/proc/PID/stat) and peak
# RSS (VmHWM). Prints the medians as a Markdown table and keeps the raw samples.
#
# Usage: bench/server/run.sh        (as root on Debian 12; installs packages and builds first)
# Environment: RUNS (5), DURATION seconds per run (10), CONNS (8), SERVER_CPU (1), CLIENT_CPU (0),
#              BODIES (bench/bodies/review-15k.json bench/bodies/review-3k.json), OUT (a temp dir),
#              NICE (-10: server and wrk run at this nice level so that other work on a shared
#              machine, builds above all, disturbs them less; 0 to turn off).
set -euo pipefail
cd "$(dirname "$0")/../.."

RUNS=${RUNS:-5}
DURATION=${DURATION:-10}
CONNS=${CONNS:-8}
SERVER_CPU=${SERVER_CPU:-1}
CLIENT_CPU=${CLIENT_CPU:-0}
BODIES=${BODIES:-"bench/bodies/review-15k.json bench/bodies/review-3k.json"}
NICE=${NICE:--10}
# "${pinned[@]}" CPU COMMAND...: pinned, at the benchmark's priority. An array, not a function, so
# that nice and taskset exec into the command and $! is the server's own pid.
pinned=(nice -n "$NICE" taskset -c)

scripts/install-deps.sh >&2
scripts/build.sh build >&2

work=$(mktemp -d /tmp/erdma-server-bench.XXXXXX)
OUT=${OUT:-$work}
mkdir -p "$OUT"
pid=""
cleanup() {
  if [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null; then kill "$pid"; wait "$pid" 2>/dev/null || true; fi
  rm -rf "$work/certs"
}
trap cleanup EXIT
certs/erdma-certs generate --dir "$work/certs" 2>/dev/null
clk_tck=$(getconf CLK_TCK)

cpu_ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; }  # utime + stime of the process
peak_rss() { awk '/^VmHWM:/ {print $2}' "/proc/$1/status"; }
anon_rss() { awk '/^RssAnon:/ {print $2}' "/proc/$1/status"; }  # heap and stacks, not library pages

start_server() {  # start_server NAME -> sets pid and port
  local name=$1 ports="$work/ports.json"
  rm -f "$ports"
  case $name in
    erdma-webhook)
      # Default log level: one JSON line per admission is written (to /dev/null here).
      "${pinned[@]}" "$SERVER_CPU" build/webhook/erdma-webhook serve --threads 1 \
        --listen 127.0.0.1:0 --metrics-listen 127.0.0.1:0 --port-file "$ports" \
        --tls-cert "$work/certs/tls.crt" --tls-key "$work/certs/tls.key" 2>/dev/null &
      ;;
    trivial-tls)
      "${pinned[@]}" "$SERVER_CPU" build/bench/server/trivial_tls_server "$work/certs/tls.crt" "$work/certs/tls.key" "$ports" &
      ;;
  esac
  pid=$!
  for _ in $(seq 100); do [ -s "$ports" ] && break; sleep 0.05; done
  [ -s "$ports" ] || { echo "bench: $name did not start" >&2; exit 1; }
  port=$(/usr/bin/python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["https"])' "$ports")
}

stop_server() {
  kill -TERM "$pid"
  wait "$pid" 2>/dev/null || true
  pid=""
}

samples="$OUT/samples.jsonl"
: >"$samples"
for body in $BODIES; do
  # The body must be a real admission: check the answer once before measuring.
  start_server erdma-webhook
  answer=$(curl -sS --max-time 10 -k -H 'Content-Type: application/json' --data-binary "@$body" \
    "https://127.0.0.1:$port/mutate-pods?timeout=10s")
  stop_server
  echo "$answer" | grep -q '"allowed":true' || { echo "bench: $body is not admitted: ${answer:0:200}" >&2; exit 1; }
  for run in $(seq "$RUNS"); do
    for server in erdma-webhook trivial-tls; do
      start_server "$server"
      url="https://127.0.0.1:$port/mutate-pods?timeout=10s"
      # Warm-up: handshakes, allocator, page faults.
      BODY=$body "${pinned[@]}" "$CLIENT_CPU" wrk -t1 -c"$CONNS" -d2s -s bench/server/post.lua "$url" >/dev/null
      t0=$(cpu_ticks "$pid")
      raw="$OUT/wrk-$(basename "$body" .json)-$server-$run.txt"
      load=$(cut -d' ' -f1 /proc/loadavg)
      BODY=$body "${pinned[@]}" "$CLIENT_CPU" wrk -t1 -c"$CONNS" -d"${DURATION}s" --latency -s bench/server/post.lua \
        "$url" >"$raw"
      t1=$(cpu_ticks "$pid")
      rss=$(peak_rss "$pid")
      anon=$(anon_rss "$pid")
      stop_server
      /usr/bin/python3 - "$raw" "$body" "$server" "$t0" "$t1" "$clk_tck" "$rss" "$DURATION" "$anon" "$load" \
        >>"$samples" <<'EOF'
import json, subprocess, sys
raw, body, server, t0, t1, tck, rss, duration, anon, load = sys.argv[1:]
s = json.loads(subprocess.run(["/usr/bin/python3", "bench/server/summarize.py", "--wrk", raw],
                              capture_output=True, text=True, check=True).stdout)
cpu = (int(t1) - int(t0)) / int(tck)
s.update(body=body.rsplit("/", 1)[-1], server=server, cpu_s=cpu, cpu_us_per_req=1e6 * cpu / s["requests"],
         cpu_util=cpu / float(duration), peak_rss_kib=int(rss), anon_rss_kib=int(anon), load_before=float(load))
print(json.dumps(s))
EOF
      tail -1 "$samples" >&2
    done
  done
done

echo "# erdma-webhook serve vs trivial_tls_server: $RUNS runs x ${DURATION}s, $CONNS keep-alive connections,"
echo "# server on CPU $SERVER_CPU, wrk (1 thread) on CPU $CLIENT_CPU, nice $NICE; medians (RSS: max over runs)"
echo
/usr/bin/python3 bench/server/summarize.py <"$samples"
echo
echo "raw samples: $samples" >&2
