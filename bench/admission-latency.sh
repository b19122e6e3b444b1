#!/usr/bin/env bash
# What each SMC-R admission path adds to a Pod CREATE on a real kube-apiserver (bench/
# admission_latency.py says how): starts scripts/cluster.sh's one-node Kubernetes, runs
# erdma-webhook beside kube-apiserver and the MutatingAdmissionPolicy of manifests/admission-policy,
# prints p50/p90/p99 per path and what each adds to no admission at all, and stops the cluster.
# Root; no cluster may be up. The numbers are printed, not judged.
#   bench/admission-latency.sh [BUILD_DIR]     (default build; ROUNDS=300 in the environment)
set -euo pipefail
SRC=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
BUILD=$(cd "${1:-build}" 2>/dev/null && pwd) || { echo "admission-latency: no build tree ${1:-build}" >&2; exit 1; }
CLUSTER=$SRC/scripts/cluster.sh
STATE=${ERDMA_CLUSTER_DIR:-/run/erdma-cluster}
# shellcheck source=test/cluster/lib.sh
. "$SRC/test/cluster/lib.sh"
# shellcheck source=test/cluster/checks.sh
. "$SRC/test/cluster/checks.sh"
cluster_session bench-admission
cluster_up
python3 "$SRC/bench/admission_latency.py" --src "$SRC" --webhook "$BUILD/webhook/erdma-webhook" --work "$work" \
  --server "https://127.0.0.1:${ERDMA_CLUSTER_PORT:-6443}" --ca "$STATE/pki/ca.crt" --cert "$STATE/pki/admin.crt" \
  --key "$STATE/pki/admin.key" --rounds "${ROUNDS:-300}"
