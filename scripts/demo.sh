#!/usr/bin/env bash
# The demo: installs the Debian packages and builds, then runs the admission server on localhost
# with freshly generated certificates and sends every pod of the example workloads in examples/
# to it exactly as kube-apiserver would (HTTPS/1.1, SNI and certificate verification against
# erdma-webhook.erdma-system.svc, POST /mutate-pods?timeout=10s), printing each answer and the
# JSON Patch it carries. Then shows the metrics and log lines, and stops the server with SIGTERM
# (a graceful drain). Keys live in a temporary directory that is removed at the end.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
# Only the program the demo runs, configured as the test command configures build/ (-DWERROR=ON):
# ./scripts/test.sh afterwards reuses these objects instead of compiling them again.
BUILD_TARGETS=erdma-webhook scripts/build.sh build -DWERROR=ON
bin=build/webhook/erdma-webhook
svc=erdma-webhook.erdma-system.svc
py=/usr/bin/python3  # Debian's interpreter (stdlib only here)

work=$(mktemp -d /tmp/erdma-demo.XXXXXX)
server_pid=""
cleanup() {
  if [ -n "$server_pid" ] && kill -0 "$server_pid" 2>/dev/null; then
    kill -TERM "$server_pid"
    wait "$server_pid" 2>/dev/null || true
  fi
  rm -rf "$work"
}
trap cleanup EXIT

echo "######## certificates: a CA and a serving certificate for $svc"
certs/erdma-certs generate --dir "$work/certs"
openssl x509 -in "$work/certs/tls.crt" -noout -subject -enddate -ext subjectAltName | sed 's/^/  /'

echo
echo "######## starting: $bin serve --listen 127.0.0.1:0 --metrics-listen 127.0.0.1:0 ..."
"$bin" serve --listen 127.0.0.1:0 --metrics-listen 127.0.0.1:0 \
  --tls-cert "$work/certs/tls.crt" --tls-key "$work/certs/tls.key" \
  --port-file "$work/ports.json" 2>"$work/server.log" &
server_pid=$!
for _ in $(seq 200); do [ -s "$work/ports.json" ] && break; sleep 0.05; done
if [ ! -s "$work/ports.json" ]; then
  echo "demo: the server did not start:" >&2
  cat "$work/server.log" >&2
  exit 1
fi
port=$($py -c 'import json,sys; print(json.load(open(sys.argv[1]))["https"])' "$work/ports.json")
metrics_port=$($py -c 'import json,sys; print(json.load(open(sys.argv[1]))["metrics"])' "$work/ports.json")
echo "  admission: https://$svc:$port/mutate-pods (resolved to 127.0.0.1)   metrics: http://127.0.0.1:$metrics_port/metrics"

# Prints one admission answer: HTTP status, allowed, warnings, the decoded JSON Patch.
show_answer() {
  $py -c '
import base64, json, sys
status, text = sys.argv[1], sys.stdin.read()
print("  HTTP", status)
if status != "200":
    print("  " + text.strip())
    sys.exit(0)
r = json.loads(text)["response"]
print("  uid %s  allowed: %s" % (r["uid"], str(r["allowed"]).lower()))
if not r["allowed"]:
    print("  refused: " + r["status"]["message"])
for w in r.get("warnings", []):
    print("  Warning: " + w)
if "patch" in r:
    print("  patch (%s, base64-decoded):" % r["patchType"])
    for op in json.loads(base64.b64decode(r["patch"])):
        print("    " + json.dumps(op))
else:
    print("  no patch")
' "$1"
}

for f in examples/*.yaml; do
  echo
  echo "######## $f"
  # One AdmissionReview request per pod, as the apiserver would build it.
  "$bin" mutate -f "$f" -o request >"$work/requests.jsonl"
  while IFS= read -r review; do
    name=$(printf '%s' "$review" | $py -c 'import json,sys; r=json.load(sys.stdin)["request"]; print(r["namespace"] + "/" + (r["name"] or r["object"]["metadata"].get("generateName", "")))')
    echo "--- pod $name"
    code=$(printf '%s' "$review" | curl -sS --max-time 10 \
      --cacert "$work/certs/ca.crt" --resolve "$svc:$port:127.0.0.1" \
      -H 'Content-Type: application/json' --data-binary @- \
      -o "$work/answer.json" -w '%{http_code}' "https://$svc:$port/mutate-pods?timeout=10s")
    show_answer "$code" <"$work/answer.json"
  done <"$work/requests.jsonl"
done

echo
echo "######## metrics (excerpt of http://127.0.0.1:$metrics_port/metrics)"
curl -sS --max-time 10 "http://127.0.0.1:$metrics_port/metrics" |
  grep -E '^erdma_webhook_(admission_requests_total|warnings_total|tls_cert_not_after_seconds|connections_open|build_info)' |
  sed 's/^/  /'

echo
echo "######## stopping: SIGTERM drains (readyz 503, listener closed, requests in flight finish), exit 0"
kill -TERM "$server_pid"
status=0
wait "$server_pid" || status=$?
server_pid=""
echo "  exit status $status"

echo
echo "######## server log (JSON lines on stderr; one per admission)"
sed 's/^/  /' "$work/server.log"
[ "$status" -eq 0 ]
