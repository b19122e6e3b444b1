#!/usr/bin/env bash
# A cluster's worth of pods through the real kube-apiserver (bench/kwok_scale.py says what it
# measures): starts scripts/cluster.sh's control plane, builds kwok from bench/kwok (cached like
# Kubernetes) and runs it beside the apiserver to simulate the nodes, runs erdma-webhook and the
# MutatingAdmissionPolicy of manifests/admission-policy as test/cluster/admission_policy.py does,
# creates the pods, prints the table, and stops everything. Root; no cluster may be up. The
# numbers are printed, not judged.
#   bench/kwok-scale.sh [BUILD_DIR]    (default build; NODES=1000 PODS=1112 RATES=50,100,200)
set -euo pipefail
SRC=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
BUILD=$(cd "${1:-build}" 2>/dev/null && pwd) || { echo "kwok-scale: no build tree ${1:-build}" >&2; exit 1; }
CLUSTER=$SRC/scripts/cluster.sh
STATE=${ERDMA_CLUSTER_DIR:-/run/erdma-cluster}
# shellcheck source=test/cluster/lib.sh
. "$SRC/test/cluster/lib.sh"
# shellcheck source=test/cluster/checks.sh
. "$SRC/test/cluster/checks.sh"
kwok_pid=
before_down() { [ -z "$kwok_pid" ] || { kill "$kwok_pid" 2>/dev/null || true; wait "$kwok_pid" 2>/dev/null || true; }; }
cluster_session bench-kwok
t0=$SECONDS
kwok=$("$SRC/bench/kwok/build-kwok.sh" | tail -n 1)
echo "kwok-scale: kwok ready in $((SECONDS - t0)) s: $kwok"
t0=$SECONDS
cluster_up
echo "kwok-scale: control plane up in $((SECONDS - t0)) s"
# kwok manages only the nodes the bench creates (their annotation); its pods get addresses from a
# range no real network uses.
"$kwok" --kubeconfig="$KUBECONFIG" --config="$SRC/bench/kwok/stages.yaml" --manage-all-nodes=false \
  --manage-nodes-with-annotation-selector=kwok.x-k8s.io/node=fake --cidr=10.240.0.0/12 \
  --node-ip=10.239.0.1 --node-lease-duration-seconds=40 >"$work/kwok.log" 2>&1 &
kwok_pid=$!
export KWOK_PID=$kwok_pid KWOK_LOG=$work/kwok.log
python3 "$SRC/bench/kwok_scale.py" --src "$SRC" --webhook "$BUILD/webhook/erdma-webhook" --work "$work" \
  --server "https://127.0.0.1:${ERDMA_CLUSTER_PORT:-6443}" --ca "$STATE/pki/ca.crt" --cert "$STATE/pki/admin.crt" \
  --key "$STATE/pki/admin.key" --nodes "${NODES:-1000}" --pods "${PODS:-1112}" --rates "${RATES:-50,100,200}" ||
  { echo "kwok-scale: failed; kwok's last lines:" >&2; tail -n 20 "$work/kwok.log" >&2; exit 1; }
