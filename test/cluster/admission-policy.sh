#!/usr/bin/env bash
# Admission without a webhook, on a real kube-apiserver: the SMC-R MutatingAdmissionPolicy of
# manifests/admission-policy against erdma-webhook, every golden pod of the webhook's default
# configuration through both, compared field by field (test/cluster/admission_policy.py says
# how, docs/admission.md "Admission without a webhook" lists what differs). No kubelet work: every
# create is a server-side dry run. Ends with "admission-policy: N passed, M failed".
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

cluster_test_begin containerd runc openssl /usr/bin/python3 /usr/lib/cni/bridge
[ -x "$BUILD/webhook/erdma-webhook" ] || { echo "admission-policy: no $BUILD/webhook/erdma-webhook" >&2; exit 1; }

phase "cluster"
t0=$SECONDS
cluster_up || { echo "admission-policy: scripts/cluster.sh up failed" >&2; exit 1; }
echo "cluster up in $((SECONDS - t0)) s"
phase "the webhook's golden pods through the policy and the webhook"
# admission_policy.py prints a line per golden pod and its own counts; the check shows its counts
# and each pod that differs.
policy_matches_webhook() {
  local rc=0
  bounded 600 "the comparison" python3 "$SRC/test/cluster/admission_policy.py" --src "$SRC" \
    --webhook "$BUILD/webhook/erdma-webhook" --work "$work" >"$work/policy.log" 2>&1 || rc=$?
  grep -A 6 '^FAIL' "$work/policy.log"
  grep '^admission-policy: ' "$work/policy.log" || tail -n 20 "$work/policy.log"
  return $rc
}
check "every golden pod: the policy's result equals the webhook's, field by field" policy_matches_webhook
cluster_test_end
