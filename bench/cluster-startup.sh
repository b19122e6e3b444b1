#!/usr/bin/env bash
# Pod start-up on a real cluster, as a user feels it (bench/cluster_startup.py says what each way
# is): starts scripts/cluster.sh's one-node Kubernetes, installs the product as README.md says
# (test/cluster/lib.sh), creates the batches, prints p50/p90/p99 per way and the ratios, and stops
# the cluster. Root; no cluster may be up. The numbers are printed, not judged.
#   bench/cluster-startup.sh [--build-dir build] [--pods 50] [--rounds 3]
set -euo pipefail
SRC=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
BUILD=$SRC/build pods=50 rounds=3
while [ $# -gt 0 ]; do
  case $1 in
    --build-dir) BUILD=$(cd "$2" && pwd); shift 2 ;;
    --pods) pods=$2; shift 2 ;;
    --rounds) rounds=$2; shift 2 ;;
    *) sed -n '2,7p' "$0" | sed 's/^# \{0,1\}//' >&2; exit 2 ;;
  esac
done
CLUSTER=$SRC/scripts/cluster.sh
STATE=${ERDMA_CLUSTER_DIR:-/run/erdma-cluster}
# shellcheck source=test/cluster/lib.sh
. "$SRC/test/cluster/lib.sh"
if "$CLUSTER" status >/dev/null 2>&1; then echo "a cluster is already up; scripts/cluster.sh down first" >&2; exit 1; fi
work=$(mktemp -d "${TMPDIR:-/tmp}/erdma-bench-cluster.XXXXXX")
trap '"$CLUSTER" down >/dev/null 2>&1 || "$CLUSTER" down; rm -rf "$work"' EXIT
t0=$SECONDS
cluster_up
product_images
product_install
kubectl create namespace bench >/dev/null
kubectl label namespace bench erdma-injection=enabled >/dev/null
echo "cluster up and product installed in $((SECONDS - t0)) s; $pods pods a batch, $rounds rounds"
/usr/bin/python3 "$SRC/bench/cluster_startup.py" --server "https://127.0.0.1:${ERDMA_CLUSTER_PORT:-6443}" \
  --ca "$STATE/pki/ca.crt" --cert "$STATE/pki/admin.crt" --key "$STATE/pki/admin.key" \
  --namespace bench --pods "$pods" --rounds "$rounds"
