#!/usr/bin/env bash
# CDI end to end on the real one-node cluster: `ERDMA_CONTAINERD=cdi scripts/cluster.sh up`
# (containerd 2.x from test/cluster/build-containerd.sh), a CDI spec in the node's /var/run/cdi
# for the kind erdma.aliyun.com/test, a device plugin (cdi_plugin.py) whose Allocate answers
# nothing but the CDI name erdma.aliyun.com/test=card0, and a pod asking for one device: the
# kubelet passes the name to containerd in the CRI CreateContainer's CDIDevices, and containerd
# applies the spec. Checked in the container: the device's and the spec's env vars, the device
# nodes with their numbers, the device cgroup letting them be opened (an unlisted node made in the
# container is refused), the bind mount, and nothing of the spec's other device (card1). Then the
# kubelet's view (containerd answered RuntimeConfig, runtime version 2.x), `down`, and nothing left
# behind (test/cluster/leftovers.sh).
# Each check prints PASS or FAIL with its evidence; the run ends with "cdi: N passed, M failed".
#   flock /run/erdma-cluster.lock test/cluster/cdi.sh     (root; refuses to run when a cluster is up)
# Needs what scripts/cluster.sh needs, Go (the containerd build, cached) and Debian's
# /usr/bin/python3 with python3-grpcio and python3-protobuf, and protoc, for cdi_plugin.py.
set -uo pipefail
SRC=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
CLUSTER=$SRC/scripts/cluster.sh
STATE=${ERDMA_CLUSTER_DIR:-/run/erdma-cluster}
IMAGE=localhost/erdma-controller/workload:1
RESOURCE=erdma.aliyun.com/cdi-test
KIND=erdma.aliyun.com/test
CHECKS_NAME=cdi
# shellcheck source=test/cluster/checks.sh
. "$SRC/test/cluster/checks.sh"
cluster_test_begin protoc /usr/bin/python3
/usr/bin/python3 -c 'import grpc, google.protobuf' 2>/dev/null ||
  skip_or_fail "/usr/bin/python3 lacks grpc or protobuf: apt-get install python3-grpcio python3-protobuf (scripts/install-deps.sh)"
plugin_pid=
before_down() {
  [ -n "$plugin_pid" ] || return 0
  kill -KILL "$plugin_pid" 2>/dev/null
  wait "$plugin_pid" 2>/dev/null
  plugin_pid=
}
on_failure() {
  kubectl describe pod cdi
  tail -n 20 "$STATE/logs/containerd.log"
  cat "$work/plugin.err"
}

phase "cluster with containerd 2.x"
t0=$SECONDS
env_line=$(ERDMA_CONTAINERD=cdi bounded 600 "scripts/cluster.sh up" "$CLUSTER" up | tail -n 1) || exit 1
[ -n "$env_line" ] || { echo "cdi: scripts/cluster.sh up printed no export line" >&2; exit 1; }
eval "$env_line"
echo "up with containerd 2.x in $((SECONDS - t0)) s"
# Every kubectl call gives up after 90 s and says so.
kubectl() { bounded 90 "kubectl $1" kubectl "$@"; }
runtime_is_2() {
  local runtime
  runtime=$(kubectl get node erdma-node -o jsonpath='{.status.nodeInfo.containerRuntimeVersion}')
  echo "$runtime"
  case $runtime in containerd://2.*|containerd://v2.*) ;; *) return 1 ;; esac
}
must "the node reports containerd 2.x" runtime_is_2
# containerd 2.x answers the CRI RuntimeConfig call: the kubelet takes the cgroup driver from it
# instead of falling back to its configuration.
cgroup_driver_from_cri() {
  grep -m1 -o 'Using cgroup driver setting received from the CRI runtime.*' "$STATE/logs/kubelet.log" |
    grep -F 'cgroupDriver="cgroupfs"'
}
check "the kubelet took its cgroup driver (cgroupfs) from containerd (RuntimeConfig)" cgroup_driver_from_cri

phase "a CDI spec and a device plugin that answers with its name"
# The node's devices (its own /dev, never this machine's): the numbers of uverbs and rdma_cm, no
# driver behind them here; a file for the bind mount; the CDI spec. All inside the sandbox.
node_devices() {
  bounded 60 "making the device nodes" "$CLUSTER" exec sh -c 'mkdir -p /dev/infiniband /var/lib/erdma-cdi-test &&
    mknod -m 666 /dev/infiniband/uverbs0 c 231 192 && mknod -m 666 /dev/infiniband/uverbs1 c 231 193 &&
    mknod -m 666 /dev/infiniband/rdma_cm c 10 58 && echo preload-from-cdi > /var/lib/erdma-cdi-test/preload.txt'
}
must "the node's device nodes (uverbs0, uverbs1, rdma_cm) and a file to mount" node_devices
# cdiVersion 0.5.0: every containerd with CDI (1.7.0 on) reads it; 0.6.0 and later need 1.7.12 or
# newer (docs/dra-runtime.md).
cdi_spec() {
  bounded 60 "writing the CDI spec" "$CLUSTER" exec sh -c 'cat > /var/run/cdi/erdma-test.json' <<EOF
{
  "cdiVersion": "0.5.0",
  "kind": "$KIND",
  "containerEdits": {
    "env": ["ERDMA_CDI_SPEC=erdma-test"],
    "deviceNodes": [{"path": "/dev/infiniband/rdma_cm"}]
  },
  "devices": [
    {"name": "card0", "containerEdits": {
      "env": ["ERDMA_CDI_CARD0=uverbs0"],
      "deviceNodes": [{"path": "/dev/infiniband/uverbs0", "type": "c", "major": 231, "minor": 192, "permissions": "rw"}],
      "mounts": [{"hostPath": "/var/lib/erdma-cdi-test/preload.txt", "containerPath": "/usr/lib/erdma-cdi-test/preload.txt",
                  "options": ["ro", "bind"]}]}},
    {"name": "card1", "containerEdits": {
      "env": ["ERDMA_CDI_CARD1=uverbs1"],
      "deviceNodes": [{"path": "/dev/infiniband/uverbs1"}]}}
  ]
}
EOF
}
must "a CDI spec for $KIND (card0, card1) in the node's /var/run/cdi" cdi_spec

# The device plugin runs here; its socket and the kubelet's are in the node's /var/lib/kubelet,
# which is the state directory's kubelet/ bound in. It advertises card0 only.
/usr/bin/python3 "$SRC/test/cluster/cdi_plugin.py" --dir "$STATE/kubelet/device-plugins" --resource "$RESOURCE" \
  --device "card0=$KIND=card0" --seconds 600 >"$work/plugin.out" 2>"$work/plugin.err" &
plugin_pid=$!
capacity() { [ "$(kubectl get node erdma-node -o jsonpath="{.status.allocatable.${RESOURCE//./\\.}}")" = 1 ]; }
must "the device plugin registered: $RESOURCE allocatable 1" wait_for 60 capacity

phase "a pod asking for the device"
cdi_pod() {
  local t1=$SECONDS
  kubectl apply -f - >/dev/null <<EOF || return 1
apiVersion: v1
kind: Pod
metadata: {name: cdi, namespace: default}
spec:
  terminationGracePeriodSeconds: 1
  containers:
  - name: main
    image: $IMAGE
    imagePullPolicy: Never
    command: ["sh", "-c", "echo cdi-started; exec sleep 100000"]
    resources:
      limits: {$RESOURCE: 1}
EOF
  kubectl wait --for=condition=Ready pod/cdi --timeout=80s >/dev/null || return 1
  echo "Ready in $((SECONDS - t1)) s; Allocate answered: $(cat "$work/plugin.out")"
}
must "the pod is Ready" cdi_pod
check "the plugin saw an Allocate answered with the CDI name of card0" \
  grep -F "\"cdi_devices\": [\"$KIND=card0\"]" "$work/plugin.out"

in_pod() { kubectl exec cdi -- sh -c "$1"; }  # bounded like every kubectl call
# in_pod_is WANT CMD: CMD's output in the pod is exactly WANT (the output is the evidence).
in_pod_is() {
  local got
  got=$(in_pod "$2") || return 1
  echo "$got"
  [ "$got" = "$1" ]
}
check "env: ERDMA_CDI_CARD0 and ERDMA_CDI_SPEC only (nothing of card1)" \
  in_pod_is "$(printf 'ERDMA_CDI_CARD0=uverbs0\nERDMA_CDI_SPEC=erdma-test')" 'env | grep ^ERDMA_CDI_ | sort'
# shellcheck disable=SC2016  # expanded by the shell in the pod
check "device nodes: /dev/infiniband/rdma_cm (10:58) and uverbs0 (231:192) only" \
  in_pod_is "$(printf '/dev/infiniband/rdma_cm character special file a:3a\n/dev/infiniband/uverbs0 character special file e7:c0')" \
  'for d in /dev/infiniband/*; do stat -c "%n %F %t:%T" "$d"; done'
# The device cgroup: CDI's nodes may be opened (no driver here: "No such device ..."), a node with
# numbers CDI did not list, made in the container, may not ("Operation not permitted").
cdi_nodes_open() {
  local out
  out=$(in_pod 'cat /dev/infiniband/uverbs0 2>&1 >/dev/null; cat /dev/infiniband/rdma_cm 2>&1 >/dev/null; true') || return 1
  echo "$out"
  case $out in *"not permitted"*) return 1 ;; esac
}
check "the device cgroup lets the CDI device nodes be opened" cdi_nodes_open
other_node_refused() {
  local out
  out=$(in_pod 'mknod /tmp/other c 231 194 && cat /tmp/other 2>&1 >/dev/null; true') || return 1
  echo "$out"
  case $out in *"not permitted"*) ;; *) return 1 ;; esac
}
check "the device cgroup refuses an unlisted node (231:194) made in the container" other_node_refused
check "the CDI bind mount brings the file, read-only" in_pod_is "$(printf 'preload-from-cdi\nro')" \
  'cat /usr/lib/erdma-cdi-test/preload.txt; grep " /usr/lib/erdma-cdi-test/preload.txt " /proc/self/mountinfo | grep -o "[ ,]ro[ ,]" | head -n 1 | tr -d " ,"'

phase "the pod and the plugin go"
check "the pod is deleted" kubectl delete pod cdi --wait=true --timeout=60s
kill -TERM "$plugin_pid"
# It stops on TERM within its one-second poll and a 5 s server stop.
stopped() { ! kill -0 "$plugin_pid" 2>/dev/null; }
check "cdi_plugin.py ends after SIGTERM" wait_for 30 stopped
# Its status, waited for here (check runs its command in a subshell, which cannot wait for it).
plugin_rc="still running"
if stopped; then
  plugin_rc=0
  wait "$plugin_pid" || plugin_rc=$?
  plugin_pid=
fi
plugin_ended_well() {
  tail -n 3 "$work/plugin.err"
  echo "status: $plugin_rc"
  [ "$plugin_rc" = 0 ]
}
check "... with status 0" plugin_ended_well
cluster_test_end
