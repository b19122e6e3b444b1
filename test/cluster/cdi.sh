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
# behind (test/cluster/leftovers.sh). Exit 0 when all of that holds.
#   flock /run/erdma-cluster.lock test/cluster/cdi.sh     (root; refuses to run when a cluster is up)
# Needs what scripts/cluster.sh needs, Go (the containerd build, cached) and Debian's
# /usr/bin/python3 with python3-grpcio and python3-protobuf, and protoc, for cdi_plugin.py.
set -euo pipefail
SRC=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
CLUSTER=$SRC/scripts/cluster.sh
STATE=${ERDMA_CLUSTER_DIR:-/run/erdma-cluster}
PORT=${ERDMA_CLUSTER_PORT:-6443}
IMAGE=localhost/erdma-controller/workload:1
RESOURCE=erdma.aliyun.com/cdi-test
KIND=erdma.aliyun.com/test

CHECKS_NAME=cdi
fail() { echo "cdi: FAILED: $*" >&2; exit 1; }
step() { echo "cdi: $*" >&2; }

[ "$(id -u)" -eq 0 ] || fail "run as root"
if "$CLUSTER" status > /dev/null 2>&1; then fail "a cluster is already up at $STATE; run scripts/cluster.sh down first"; fi
for t in /usr/bin/python3 protoc; do command -v "$t" > /dev/null || fail "$t not found (scripts/install-deps.sh installs it)"; done
/usr/bin/python3 -c 'import grpc, google.protobuf' 2>/dev/null ||
  fail "/usr/bin/python3 lacks grpc or protobuf: apt-get install python3-grpcio python3-protobuf (scripts/install-deps.sh)"

# shellcheck source=leftovers.sh
. "$SRC/test/cluster/leftovers.sh"
# shellcheck source=checks.sh
. "$SRC/test/cluster/checks.sh"
leftovers_before

work=$(mktemp -d "${TMPDIR:-/tmp}/erdma-cdi.XXXXXX")
plugin_pid=
downed=0
cleanup() {
  if [ -n "$plugin_pid" ]; then kill -KILL "$plugin_pid" 2>/dev/null || true; wait "$plugin_pid" 2>/dev/null || true; fi
  [ $downed -eq 1 ] || "$CLUSTER" down || true
  rm -rf "$work"
}
trap cleanup EXIT

# await WHAT SECONDS CMD...: CMD every 0.5 s until it succeeds, or fail after SECONDS.
await() {
  local what=$1 end=$((SECONDS + $2))
  shift 2
  until "$@" > /dev/null 2>&1; do
    [ $SECONDS -lt $end ] || fail "timed out waiting for $what"
    sleep 0.5
  done
}

t0=$SECONDS
step "starting the cluster with containerd 2.x"
env_line=$(ERDMA_CONTAINERD=cdi bounded 600 "scripts/cluster.sh up" "$CLUSTER" up | tail -n 1) || fail "scripts/cluster.sh up failed"
[ -n "$env_line" ] || fail "scripts/cluster.sh up printed no export line"
eval "$env_line"
step "up with containerd 2.x in $((SECONDS - t0)) s"

# Every kubectl call gives up after a minute and says so.
kubectl() { bounded 90 "kubectl $1" kubectl "$@"; }
runtime=$(kubectl get node erdma-node -o jsonpath='{.status.nodeInfo.containerRuntimeVersion}')
case $runtime in containerd://2.*|containerd://v2.*) ;; *) fail "the node reports runtime '$runtime', expected containerd 2.x" ;; esac
step "node runtime: $runtime"
# containerd 2.x answers the CRI RuntimeConfig call: the kubelet takes the cgroup driver from it
# instead of falling back to its configuration.
driver=$(grep -m1 -o 'Using cgroup driver setting received from the CRI runtime.*' "$STATE/logs/kubelet.log") ||
  fail "the kubelet did not take its cgroup driver from containerd (RuntimeConfig): $(grep -m1 cgroupDriver "$STATE/logs/kubelet.log")"
case $driver in *'cgroupDriver="cgroupfs"'*) ;; *) fail "expected the cgroupfs driver from containerd: $driver" ;; esac
step "kubelet: $driver"

# The node's devices (its own /dev, never this machine's): the numbers of uverbs and rdma_cm, no
# driver behind them here; a file for the bind mount; the CDI spec. All inside the sandbox.
bounded 60 "making the device nodes" "$CLUSTER" exec sh -c 'mkdir -p /dev/infiniband /var/lib/erdma-cdi-test &&
  mknod -m 666 /dev/infiniband/uverbs0 c 231 192 && mknod -m 666 /dev/infiniband/uverbs1 c 231 193 &&
  mknod -m 666 /dev/infiniband/rdma_cm c 10 58 && echo preload-from-cdi > /var/lib/erdma-cdi-test/preload.txt'
# cdiVersion 0.5.0: every containerd with CDI (1.7.0 on) reads it; 0.6.0 and later need 1.7.12 or
# newer (docs/dra-runtime.md).
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
step "CDI spec for $KIND (card0, card1) in the node's /var/run/cdi"

# The device plugin runs here; its socket and the kubelet's are in the node's /var/lib/kubelet,
# which is the state directory's kubelet/ bound in. It advertises card0 only.
/usr/bin/python3 "$SRC/test/cluster/cdi_plugin.py" --dir "$STATE/kubelet/device-plugins" --resource "$RESOURCE" \
  --device "card0=$KIND=card0" --seconds 600 > "$work/plugin.out" 2> "$work/plugin.err" &
plugin_pid=$!
capacity() { [ "$(kubectl get node erdma-node -o jsonpath="{.status.allocatable.${RESOURCE//./\\.}}")" = 1 ]; }
await "$RESOURCE on the node (plugin: $(cat "$work/plugin.err" 2>/dev/null))" 60 capacity
step "device plugin registered: $RESOURCE allocatable 1"

t1=$SECONDS
kubectl apply -f - > /dev/null <<EOF
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
kubectl wait --for=condition=Ready pod/cdi --timeout=80s > /dev/null || {
  kubectl describe pod cdi >&2
  tail -n 20 "$STATE/logs/containerd.log" >&2
  fail "the pod did not become Ready"
}
step "pod Ready in $((SECONDS - t1)) s; Allocate answered: $(cat "$work/plugin.out")"
grep -qF "\"cdi_devices\": [\"$KIND=card0\"]" "$work/plugin.out" || fail "the plugin saw no Allocate for card0"

in_pod() { kubectl exec cdi -- sh -c "$1"; }  # bounded like every kubectl call
env_out=$(in_pod 'env | grep ^ERDMA_CDI_ | sort')
step "env: $(echo "$env_out" | tr '\n' ' ')"
[ "$env_out" = "$(printf 'ERDMA_CDI_CARD0=uverbs0\nERDMA_CDI_SPEC=erdma-test')" ] ||
  fail "expected ERDMA_CDI_CARD0 and ERDMA_CDI_SPEC only (nothing of card1), got: $env_out"
# shellcheck disable=SC2016  # expanded by the shell in the pod
nodes=$(in_pod 'for d in /dev/infiniband/*; do stat -c "%n %F %t:%T" "$d"; done')
step "device nodes: $(echo "$nodes" | tr '\n' ';')"
[ "$nodes" = "$(printf '/dev/infiniband/rdma_cm character special file a:3a\n/dev/infiniband/uverbs0 character special file e7:c0')" ] ||
  fail "expected /dev/infiniband/rdma_cm (10:58) and uverbs0 (231:192) only, got: $nodes"
# The device cgroup: CDI's nodes may be opened (no driver here: "No such device ..."), a node with
# numbers CDI did not list, made in the container, may not ("Operation not permitted").
open_cdi=$(in_pod 'cat /dev/infiniband/uverbs0 2>&1 >/dev/null; cat /dev/infiniband/rdma_cm 2>&1 >/dev/null; true')
step "opening the CDI nodes: $(echo "$open_cdi" | tr '\n' ';')"
case $open_cdi in *"not permitted"*) fail "the device cgroup refused a CDI device node: $open_cdi" ;; esac
open_other=$(in_pod 'mknod /tmp/other c 231 194 && cat /tmp/other 2>&1 >/dev/null; true')
step "opening an unlisted node (231:194) made in the container: $open_other"
case $open_other in *"not permitted"*) ;; *) fail "expected the device cgroup to refuse 231:194, got: $open_other" ;; esac
mount_out=$(in_pod 'cat /usr/lib/erdma-cdi-test/preload.txt; grep " /usr/lib/erdma-cdi-test/preload.txt " /proc/self/mountinfo | grep -o "[ ,]ro[ ,]" | head -n 1')
step "bind mount: $(echo "$mount_out" | tr '\n' ' ')"
[ "$(echo "$mount_out" | head -n 1)" = preload-from-cdi ] || fail "the CDI mount did not bring the file: $mount_out"
[ "$(echo "$mount_out" | sed -n 2p | tr -d ' ,')" = ro ] || fail "the CDI mount is not read-only: $mount_out"

kubectl delete pod cdi --wait=true --timeout=60s > /dev/null || fail "the pod was not deleted"
kill -TERM "$plugin_pid"
# It stops on TERM within its one-second poll and a 5 s server stop.
stopped() { ! kill -0 "$plugin_pid" 2>/dev/null; }
await "cdi_plugin.py to end after SIGTERM ($(tail -n 3 "$work/plugin.err" 2>/dev/null))" 30 stopped
wait "$plugin_pid" || fail "cdi_plugin.py ended with $?: $(cat "$work/plugin.err")"
plugin_pid=
down_and_check "$t0"
