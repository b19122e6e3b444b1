# shellcheck shell=bash
# Sourced by test/cluster/journey.sh, upgrade.sh, dra.sh and bench/cluster-startup.sh: a cluster from
# scripts/cluster.sh with the product's images on its node, and the product installed the way
# README.md tells a user. The callers set SRC (the repository), BUILD (a build tree), CLUSTER
# (scripts/cluster.sh), STATE (its state directory) and work (a scratch directory of theirs).
# The node has no eRDMA card: the site overlay gives the agent one static device, erdma_0 on
# uverbs0, and the node's /dev (the sandbox's, never this machine's) gets the two character
# devices Allocate hands to containers.

NODE=erdma-node
# shellcheck disable=SC2034  # used by the callers
WORKLOAD=localhost/erdma-controller/workload:1

# cluster_up: starts the cluster; exports KUBECONFIG and puts its kubectl first on PATH.
cluster_up() {
  local out
  # shellcheck disable=SC2154  # the caller sets work
  out=$("$CLUSTER" up 2>"$work/up.log") || { cat "$work/up.log" >&2; return 1; }
  eval "$(printf '%s\n' "$out" | tail -n 1)"
  export KUBECONFIG
  PATH="$(cat "$STATE/bin"):$PATH"
  export PATH
}

# product_images: builds the agent, webhook and workload images from $BUILD, imports them into
# the node's containerd, and makes the static device's nodes in the node's /dev.
product_images() {
  "$SRC/images/build-images.sh" --build-dir "$BUILD" --out "$work/images" erdma-agent erdma-webhook workload \
    >/dev/null || return 1
  "$CLUSTER" import "$work/images/erdma-agent.tar" "$work/images/erdma-webhook.tar" "$work/images/workload.tar" \
    >/dev/null || return 1
  "$CLUSTER" exec sh -c 'mkdir -p /dev/infiniband &&
    { [ -e /dev/infiniband/uverbs0 ] || mknod -m 666 /dev/infiniband/uverbs0 c 231 192; } &&
    { [ -e /dev/infiniband/rdma_cm ] || mknod -m 666 /dev/infiniband/rdma_cm c 10 58; }'
}

# site_static_device DIR [MANIFESTS]: the site overlay in DIR (its kustomization.yaml has no
# configMapGenerator yet) replaces the agent's configuration with the base's file (of MANIFESTS,
# default this tree's manifests/) but a static device, the README's way to change a setting.
site_static_device() {
  sed -e 's/^  source: verbs$/  source: static\n  static: [{name: erdma_0, uverbs: uverbs0, netdev: eth0}]/' \
    "${2:-$SRC/manifests}/base/agent-config.yaml" >"$1/agent-config.yaml"
  grep -q 'source: static' "$1/agent-config.yaml" || { echo "agent-config.yaml: no 'source: verbs' to replace" >&2; return 1; }
  printf '%s\n' 'configMapGenerator:' '- name: erdma-agent-config' '  namespace: erdma-system' \
    '  behavior: replace' '  files:' '  - config.yaml=agent-config.yaml' >>"$1/kustomization.yaml"
}

# product_site: a site overlay of manifests/default beside a copy of manifests/ ($work/site), with
# a static device.
product_site() {
  cp -r "$SRC/manifests" "$work/manifests"
  mkdir -p "$work/site"
  printf '%s\n' 'apiVersion: kustomize.config.k8s.io/v1beta1' 'kind: Kustomization' 'resources:' \
    '- ../manifests/default' >"$work/site/kustomization.yaml"
  site_static_device "$work/site"
}

# capacity: the node's aliyun/erdma capacity, when the agent registered some.
capacity() { kubectl get node "$NODE" -o jsonpath='{.status.capacity.aliyun/erdma}' | grep -E '^[1-9][0-9]*$'; }

# cluster_view: the pods, the last Events and the agent's and webhook's last log lines: what a test
# over manifests/default prints when a check failed (its on_failure).
cluster_view() {
  kubectl get pods -A -o wide
  kubectl get events -A --sort-by=.lastTimestamp | tail -n 25
  kubectl -n erdma-system logs ds/erdma-agent --tail=20
  kubectl -n erdma-system logs deploy/erdma-webhook --tail=10
}

# product_install: the whole install in one go (the journey does it step by step, with checks).
# Needs checks.sh (wait_for).
product_install() {
  kubectl label node "$NODE" aliyun.accelerator/erdma=true --overwrite >/dev/null &&
    product_site &&
    kubectl apply -k "$work/site" >/dev/null &&
    "$SRC/certs/erdma-certs" generate --dir "$work/pki" >/dev/null &&
    "$SRC/certs/erdma-certs" apply --dir "$work/pki" >/dev/null &&
    kubectl -n erdma-system rollout status deployment/erdma-webhook --timeout=180s >/dev/null &&
    kubectl -n erdma-system rollout status daemonset/erdma-agent --timeout=180s >/dev/null || return 1
  wait_for 60 capacity >/dev/null || { echo "no aliyun/erdma capacity after 60 s" >&2; return 1; }
}

# A load of pod creations while an upgrade or a fault is under way: test/cluster/create_loop.py in
# the background, server-side dry runs of SMC-R pods in namespace $NS, authenticated with the
# cluster's admin certificate ($STATE/pki). load_start starts it; `check "load running" wait_for 60
# test -e "$work/started"` waits for its first admitted pod. It is not run through check: the loop
# must be this shell's child, for load_stop to wait for it.
load_pid=
load_start() {
  rm -f "$work/stop" "$work/started" "$work/load.json"
  /usr/bin/python3 "$SRC/test/cluster/create_loop.py" --server "https://127.0.0.1:${ERDMA_CLUSTER_PORT:-6443}" \
    --ca "$STATE/pki/ca.crt" --cert "$STATE/pki/admin.crt" --key "$STATE/pki/admin.key" --namespace "$NS" \
    --interval 0.1 --max-seconds 900 --stop-file "$work/stop" --started-file "$work/started" \
    >"$work/load.json" 2>"$work/load.err" &
  load_pid=$!
}
load_stop() {  # ends the loop (in this shell: it waits for its child)
  touch "$work/stop"
  wait "$load_pid"
  load_pid=
}
load_verdict() {  # the loop's counts; succeeds when every create was admitted and mutated
  cat "$work/load.json" "$work/load.err"
  /usr/bin/python3 -c 'import json, sys
d = json.load(open(sys.argv[1]))
sys.exit(0 if d["created"] > 0 and d["failed"] == 0 and d["unmutated"] == 0 else 1)' "$work/load.json"
}
