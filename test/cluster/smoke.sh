#!/usr/bin/env bash
# Smoke check of scripts/cluster.sh on this machine: `up`, a pod from the project's workload image
# on the real kubelet (Running, `kubectl exec`, `kubectl logs`, the `kubernetes` Service reachable
# from the pod), then `down`, and a check that nothing is left: no process of the state
# directory, no mount, no network namespace, no cgroup, no listener, no file outside the state
# directory, the machine's iptables rules as before. Exit 0 when all of that holds.
#   test/cluster/smoke.sh         (root; refuses to run when a cluster is already up)
set -euo pipefail
SRC=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
CLUSTER=$SRC/scripts/cluster.sh
STATE=${ERDMA_CLUSTER_DIR:-/run/erdma-cluster}
PORT=${ERDMA_CLUSTER_PORT:-6443}
IMAGE=localhost/erdma-controller/workload:1

CHECKS_NAME=smoke
fail() { echo "smoke: FAILED: $*" >&2; exit 1; }
step() { echo "smoke: $*" >&2; }

[ "$(id -u)" -eq 0 ] || fail "run as root"
if "$CLUSTER" status > /dev/null 2>&1; then fail "a cluster is already up at $STATE; run scripts/cluster.sh down first"; fi

# What the machine looks like before: compared after `down`.
# shellcheck source=leftovers.sh
. "$SRC/test/cluster/leftovers.sh"
# shellcheck source=checks.sh
. "$SRC/test/cluster/checks.sh"
leftovers_before

downed=0
trap '[ $downed -eq 1 ] || "$CLUSTER" down' EXIT
t0=$SECONDS
env_line=$(bounded 600 "scripts/cluster.sh up" "$CLUSTER" up | tail -n 1) || fail "scripts/cluster.sh up failed"
eval "$env_line"
# Every kubectl call gives up after 90 s and says which one it was.
kubectl() { bounded 90 "kubectl $1" kubectl "$@"; }
step "up in $((SECONDS - t0)) s"

kubectl apply -f - <<EOF
apiVersion: v1
kind: Pod
metadata:
  name: smoke
  namespace: default
spec:
  terminationGracePeriodSeconds: 1
  containers:
  - name: main
    image: $IMAGE
    imagePullPolicy: Never
    command: ["sh", "-c", "echo smoke-started; exec sleep 100000"]
EOF
t1=$SECONDS
kubectl wait --for=condition=Ready pod/smoke --timeout=80s || {
  kubectl describe pod smoke >&2
  fail "the pod did not become Ready"
}
step "pod Ready in $((SECONDS - t1)) s: $(kubectl get pod smoke -o jsonpath='{.status.phase} {.status.podIP} on {.spec.nodeName}')"
# shellcheck disable=SC2016  # expanded by the shell in the pod
out=$(kubectl exec smoke -- sh -c 'echo "exec-ok $(hostname) $KUBERNETES_SERVICE_HOST:$KUBERNETES_SERVICE_PORT"')
step "kubectl exec: $out"
case $out in exec-ok\ smoke\ *) ;; *) fail "unexpected exec output: $out" ;; esac
logs=$(kubectl logs smoke)
[ "$logs" = smoke-started ] || fail "kubectl logs gave '$logs'"
step "kubectl logs: $logs"
# The kubernetes Service (kube-proxy's rules in the sandbox) leads to the API server.
# shellcheck disable=SC2016  # expanded by the shell in the pod
svc=$(kubectl exec smoke -- sh -c 'busybox nc -w 5 "$KUBERNETES_SERVICE_HOST" "$KUBERNETES_SERVICE_PORT" </dev/null && echo tcp-ok')
[ "$svc" = tcp-ok ] || fail "no TCP connection to the kubernetes Service from the pod: '$svc'"
step "pod -> kubernetes Service: $svc"

# The pod stays: `down` must take its containers, shims and cgroups with the sandbox.
down_and_check "$t0"
