#!/bin/sh
# Runs the shared load harness (run-matrix.sh of the bench directory beside this checkout) with
# erdma-webhook beside the Go net/http peer and the two trivial TLS servers. Installs what the
# harness needs (Debian packages), builds the product, then measures for about 9 minutes.
#
#   bench/matrix.sh [--harness DIR] [--build DIR] [-- extra run-matrix.sh options]
#
# Servers: "cpp" is the product as shipped (default configuration); "cpp-peer-rules" is the
# product configured for the mutation the peer performs (the NCCL presets in erdmaEnv and the
# preload library from a hostPath volume, bench/peer-rules.yaml), the like-for-like row. Neither
# is checked by the harness's check.py: its model is the seed's rule set, which the product left
# on purpose in three places (docs/performance.md, "What check.py says").
# Keep both CPUs free while it runs: the server is pinned to CPU 0, the load generator to CPU 1.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
src=$(dirname "$here")
harness=$src/../shared/bench
build=$src/build
while [ $# -gt 0 ]; do
  case $1 in
    --harness) harness=$2; shift 2 ;;
    --build) build=$2; shift 2 ;;
    --) shift; break ;;
    -h|--help) sed -n '2,13p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "bench/matrix.sh: unknown option $1 (see --help)" >&2; exit 2 ;;
  esac
done
[ -x "$harness/run-matrix.sh" ] || {
  echo "bench/matrix.sh: no run-matrix.sh in $harness; pass --harness DIR (the shared bench directory)" >&2
  exit 2
}
if ! command -v go > /dev/null || ! command -v h2load > /dev/null; then
  apt-get install -y -q golang-go nghttp2-client util-linux > /dev/null
fi
"$src/scripts/build.sh" "$build" > /dev/null
w=$build/webhook/erdma-webhook
start=$(date +%s)
"$harness/run-matrix.sh" \
  --server "cpp=$w serve --listen {addr} --metrics-listen 127.0.0.1:0 --tls-cert {cert} --tls-key {key} --threads 1" \
  --path cpp=/mutate-pods --nocheck cpp \
  --server "cpp-peer-rules=$w serve --listen {addr} --metrics-listen 127.0.0.1:0 --tls-cert {cert} --tls-key {key} --threads 1 --config $here/peer-rules.yaml" \
  --path cpp-peer-rules=/mutate-pods --nocheck cpp-peer-rules "$@"
echo "bench/matrix.sh: $(( $(date +%s) - start )) s"
