#!/usr/bin/env bash
# Smoke check of scripts/cluster.sh on this machine: `up`, a pod from the project's workload image
# on the real kubelet (Running, `kubectl exec`, `kubectl logs`, the `kubernetes` Service reachable
# from the pod and resolved by name through the cluster's DNS), then `down`, and a check that nothing is left: no process of the state
# directory, no mount, no network namespace, no cgroup, no listener, no file outside the state
# directory, the machine's iptables rules as before. Each check prints PASS or FAIL with its
# evidence; the run ends with "smoke: N passed, M failed" and exits 1 on any failure.
#   test/cluster/smoke.sh         (root; refuses to run when a cluster is already up)
set -uo pipefail
SRC=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
CLUSTER=$SRC/scripts/cluster.sh
STATE=${ERDMA_CLUSTER_DIR:-/run/erdma-cluster}
IMAGE=localhost/erdma-controller/workload:1
CHECKS_NAME=smoke
# shellcheck source=test/cluster/lib.sh
. "$SRC/test/cluster/lib.sh"
# shellcheck source=test/cluster/checks.sh
. "$SRC/test/cluster/checks.sh"
cluster_test_begin containerd runc openssl /usr/lib/cni/bridge
on_failure() { kubectl describe pod smoke; }

phase "cluster"
t0=$SECONDS
cluster_up || { echo "smoke: scripts/cluster.sh up failed" >&2; exit 1; }
echo "up in $((SECONDS - t0)) s"
# Every kubectl call gives up after 90 s and says which one it was.
kubectl() { bounded 90 "kubectl $1" kubectl "$@"; }

phase "a pod on the real kubelet"
smoke_pod() {
  kubectl apply -f - >/dev/null <<EOF || return 1
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
  kubectl wait --for=condition=Ready pod/smoke --timeout=80s >/dev/null &&
    kubectl get pod smoke -o jsonpath='{.status.phase} {.status.podIP} on {.spec.nodeName}'
}
must "the pod is Ready" smoke_pod
exec_ok() {
  local out
  # shellcheck disable=SC2016  # expanded by the shell in the pod
  out=$(kubectl exec smoke -- sh -c 'echo "exec-ok $(hostname) $KUBERNETES_SERVICE_HOST:$KUBERNETES_SERVICE_PORT"')
  echo "$out"
  case $out in exec-ok\ smoke\ *) ;; *) return 1 ;; esac
}
check "kubectl exec runs in the pod" exec_ok
logs_ok() {
  local logs
  logs=$(kubectl logs smoke)
  echo "$logs"
  [ "$logs" = smoke-started ]
}
check "kubectl logs gives the container's output" logs_ok
# The kubernetes Service (kube-proxy's rules in the sandbox) leads to the API server.
service_ok() {
  local svc
  # shellcheck disable=SC2016  # expanded by the shell in the pod
  svc=$(kubectl exec smoke -- sh -c 'busybox nc -w 5 "$KUBERNETES_SERVICE_HOST" "$KUBERNETES_SERVICE_PORT" </dev/null && echo tcp-ok')
  echo "$svc"
  [ "$svc" = tcp-ok ]
}
check "the pod reaches the kubernetes Service over TCP" service_ok
# The cluster's DNS (test/cluster/dns.py, the kubelet's clusterDNS): the Service's name from the
# pod's resolv.conf search list, and a name outside the cluster refused.
resolves_by_name() {
  local out
  out=$(kubectl exec smoke -- sh -c 'cat /etc/resolv.conf
    busybox nslookup -type=a kubernetes.default.svc.cluster.local; busybox nslookup -type=a example.invalid 2>&1; true')
  echo "$out"
  grep -q '^search default.svc.cluster.local svc.cluster.local cluster.local' <<<"$out" &&
    grep -A1 -E '^Name:[[:space:]]+kubernetes.default.svc.cluster.local' <<<"$out" | grep -q 'Address: 10\.96\.0\.1$' &&
    grep -q "can't find example.invalid: NXDOMAIN" <<<"$out"
}
check "the pod resolves the kubernetes Service by name through the cluster's DNS" resolves_by_name

# The pod stays: `down` must take its containers, shims and cgroups with the sandbox.
cluster_test_end
