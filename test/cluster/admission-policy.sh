#!/usr/bin/env bash
# Admission without a webhook, on a real kube-apiserver: the SMC-R MutatingAdmissionPolicy of
# manifests/admission-policy against erdma-webhook, every golden pod of the webhook's default
# configuration through both, compared field by field (test/cluster/admission_policy.py says
# how, docs/admission.md "Admission without a webhook" lists what differs). No kubelet work: every
# create is a server-side dry run.
#   test/cluster/admission-policy.sh [BUILD_DIR]    (root; default BUILD_DIR: build)
# Starts its own cluster and stops it at the end, so no cluster may be up. Outside CI a machine
# that cannot run the cluster prints why and exits 0; under CI=true that is a failure.
set -uo pipefail
SRC=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
BUILD=$(cd "${1:-build}" 2>/dev/null && pwd) || { echo "admission-policy: no build tree ${1:-build}" >&2; exit 1; }
CLUSTER=$SRC/scripts/cluster.sh
STATE=${ERDMA_CLUSTER_DIR:-/run/erdma-cluster}
# shellcheck source=test/cluster/lib.sh
. "$SRC/test/cluster/lib.sh"
CHECKS_NAME=admission-policy
# shellcheck source=test/cluster/checks.sh
. "$SRC/test/cluster/checks.sh"

[ "$(id -u)" -eq 0 ] || skip_or_fail "needs root"
[ -x "$BUILD/webhook/erdma-webhook" ] || { echo "admission-policy: no $BUILD/webhook/erdma-webhook" >&2; exit 1; }
if "$CLUSTER" status >/dev/null 2>&1; then
  echo "admission-policy: a cluster is already up at $STATE; run scripts/cluster.sh down first" >&2
  exit 1
fi

work=$(mktemp -d "${TMPDIR:-/tmp}/erdma-admission-policy.XXXXXX")
finish() {
  local rc=$?
  "$CLUSTER" down >/dev/null 2>&1 || "$CLUSTER" down
  rm -rf "$work"
  exit $rc
}
trap finish EXIT

t0=$SECONDS
cluster_up || { echo "admission-policy: scripts/cluster.sh up failed" >&2; exit 1; }
echo "admission-policy: cluster up in $((SECONDS - t0)) s"
bounded 600 "the comparison" python3 "$SRC/test/cluster/admission_policy.py" --src "$SRC" \
  --webhook "$BUILD/webhook/erdma-webhook" --work "$work"
