#!/usr/bin/env bash
# The DRA driver on the real one-node cluster (docs/dra.md): Kubernetes' own apiserver, scheduler,
# controller-manager and kubelet, containerd 2.x with CDI (`ERDMA_CONTAINERD=cdi
# scripts/cluster.sh up`), and the product installed through manifests/dra with a site overlay,
# as a user would. Each check prints PASS or FAIL with its evidence; the run ends with
# "N passed, M failed" and exits 1 on any failure.
#
#   flock /run/erdma-cluster.lock test/cluster/dra.sh [BUILD_DIR]     (root; default: build)
#
# The node has no eRDMA hardware: the site's agent config lists two static cards, erdma_0 on
# uverbs0 and erdma_1 on uverbs1, and the node's /dev (the sandbox's, never this machine's) gets
# their character devices. Checked: the agent registers with the kubelet's plugin registry and
# publishes one ResourceSlice with both cards; a pod with a ResourceClaimTemplate for every card
# runs with exactly their device nodes and NCCL settings from the agent's CDI spec; a pod asking
# `aliyun/erdma: 1` the device-plugin way is served by DRA (the DeviceClass's extended resource);
# the claims survive an agent restart; a deleted slice is put back; a card gone from the node
# leaves the slice and a card down is tainted; deleting the pods unprepares their claims (the CDI
# specs and the checkpoint entries go). Outside CI a machine that cannot run the cluster prints
# why and exits 0; under CI=true that is a failure.
set -uo pipefail
SRC=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
BUILD=$(cd "${1:-build}" 2>/dev/null && pwd) || { echo "dra: no build tree ${1:-build}" >&2; exit 1; }
CLUSTER=$SRC/scripts/cluster.sh
STATE=${ERDMA_CLUSTER_DIR:-/run/erdma-cluster}
NS=team-dra
DRIVER=erdma.aliyun.com
CHECKPOINT=/var/lib/kubelet/plugins/$DRIVER/checkpoint.json
CHECKS_NAME=dra
# shellcheck source=test/cluster/lib.sh
. "$SRC/test/cluster/lib.sh"
# shellcheck source=test/cluster/checks.sh
. "$SRC/test/cluster/checks.sh"
cluster_test_begin containerd runc openssl curl /usr/bin/python3 /usr/lib/cni/bridge go
on_failure() {
  kubectl get pods,resourceclaims -A -o wide
  kubectl get resourceslices -o yaml | tail -n 60
  kubectl get events -A --sort-by=.lastTimestamp | tail -n 25
  kubectl -n erdma-system logs ds/erdma-agent --tail=40
  grep -i 'dra\|plugin' "$STATE/logs/kubelet.log" | tail -n 20
}

# --- helpers over the API's JSON (Debian's /usr/bin/python3, standard library only) ------------
# jq_py EXPR: reads JSON on stdin as `d` and prints EXPR's value (lists one item per line).
jq_py() {
  /usr/bin/python3 -c 'import json, sys
d = json.load(sys.stdin)
v = eval(sys.argv[1])
if isinstance(v, list):
    print("\n".join(str(x) for x in v))
elif v is not None:
    print(v if not isinstance(v, (dict, bool)) else json.dumps(v))' "$1"
}
# node_slices: the node's slices of this driver, as one JSON list.
node_slices() {
  kubectl get resourceslices -o json |
    jq_py "json.dumps([s for s in d['items'] if s['spec'].get('nodeName') == '$NODE' and s['spec']['driver'] == '$DRIVER'])"
}
# slice_devices: the device names the node's slices publish, sorted, on one line.
slice_devices() {
  node_slices | jq_py "' '.join(sorted(dev['name'] for s in d for dev in s['spec'].get('devices', [])))"
}
# devices_are WANT: the published devices are exactly WANT ("erdma-0 erdma-1").
devices_are() {
  local got
  got=$(slice_devices) || return 1
  echo "devices: $got"
  [ "$got" = "$1" ]
}
# on_node CMD: CMD in the node's namespaces (its /var/run/cdi, its /var/lib/kubelet).
on_node() { "$CLUSTER" exec sh -c "$1"; }
# claim_of POD: the ResourceClaim the pod's first claim or its extended resource resolved to.
claim_of() {
  kubectl -n "$NS" get pod "$1" -o json |
    jq_py "(d['status'].get('resourceClaimStatuses') or [{}])[0].get('resourceClaimName') or (d['status'].get('extendedResourceClaimStatus') or {}).get('resourceClaimName')"
}
claim_uid() { kubectl -n "$NS" get resourceclaim "$1" -o jsonpath='{.metadata.uid}'; }
# prepared UID: the agent's checkpoint on the node records the claim.
prepared() { on_node "cat $CHECKPOINT" | grep -q "\"$1\""; }
not_prepared() { ! prepared "$1"; }
spec_file_for() { on_node "ls /var/run/cdi" | grep -F "$DRIVER-claim_$1.json"; }
no_spec_file_for() { ! spec_file_for "$1" >/dev/null; }
in_pod() { kubectl -n "$NS" exec "$1" -- sh -c "$2"; }
# both FN A B: FN A and FN B.
both() { "$1" "$2" && "$1" "$3"; }
# attributes_published: every published device has the attributes docs/dra.md lists for a card
# the scan knows these facts of (static cards: no GIDs, so no gidIndex or ipv4).
attributes_published() {
  node_slices | jq_py "[' '.join(sorted(dev['attributes'])) for s in d for dev in s['spec']['devices']]" |
    tee /dev/stderr | grep -v 'ibDevice.*netdev.*smcrCapable' | grep -q . && return 1
  return 0
}

# --- the site: manifests/dra with two static cards ----------------------------------------------
# site_config STATIC_LIST: the site's agent config, manifests/dra's with the static source.
site_config() {
  sed -e "s/^  source: verbs\$/  source: static\n  static: $1/" \
    -e 's/^  extendedResource: false$/  extendedResource: true/' \
    "$SRC/manifests/dra/agent-config.yaml" >"$work/site/agent-config.yaml"
  grep -q 'source: static' "$work/site/agent-config.yaml" && grep -q 'extendedResource: true' "$work/site/agent-config.yaml"
}
site_overlay() {
  cp -r "$SRC/manifests" "$work/manifests"
  mkdir -p "$work/site"
  printf '%s\n' 'apiVersion: kustomize.config.k8s.io/v1beta1' 'kind: Kustomization' 'resources:' \
    '- ../manifests/dra' 'configMapGenerator:' '- name: erdma-agent-config' '  namespace: erdma-system' \
    '  behavior: replace' '  files:' '  - config.yaml=agent-config.yaml' >"$work/site/kustomization.yaml"
  site_config "[{name: erdma_0, uverbs: uverbs0, netdev: eth0}, {name: erdma_1, uverbs: uverbs1, netdev: eth0}]"
}
agent_rolled_out() { kubectl -n erdma-system rollout status daemonset/erdma-agent --timeout=180s; }

# ---------------------------------------------------------------------------------------------
phase "cluster with containerd 2.x (CDI)"
t0=$SECONDS
ERDMA_CONTAINERD=cdi cluster_up || { echo "dra: scripts/cluster.sh up failed" >&2; exit 1; }
echo "cluster up in $((SECONDS - t0)) s; $(kubectl version 2>/dev/null | tr '\n' ' ')"
# The checks below are functions run by check (test/cluster/checks.sh says how: in a subshell, with
# pipefail off, so a pipeline's verdict is its last command's).
runs_containerd_2() {  # NODE
  kubectl get node "$1" -o jsonpath='{.status.nodeInfo.containerRuntimeVersion}' | grep -E '^containerd://v?2\.'
}
must "the node runs containerd 2.x" runs_containerd_2 "$NODE"

phase "images and the install"
must "images built from the build tree and imported into the node's containerd" product_images
must "a second card's device node on the node (uverbs1)" on_node \
  '[ -e /dev/infiniband/uverbs1 ] || mknod -m 666 /dev/infiniband/uverbs1 c 231 193'
kubectl label node "$NODE" aliyun.accelerator/erdma=true >/dev/null
must "a site overlay over manifests/dra (two static cards, aliyun/erdma served by DRA)" site_overlay
must "kubectl apply -k (manifests/dra through the site overlay)" kubectl apply -k "$work/site"
certs_generated_and_applied() {
  "$SRC/certs/erdma-certs" generate --dir "$work/pki" >/dev/null && "$SRC/certs/erdma-certs" apply --dir "$work/pki" >/dev/null
}
must "erdma-certs generate and apply" certs_generated_and_applied
must "the webhook Deployment rolls out" kubectl -n erdma-system rollout status deployment/erdma-webhook --timeout=180s
must "the agent DaemonSet rolls out" agent_rolled_out

phase "registration and ResourceSlices"
must "the kubelet connected to the DRA driver it found in its plugin registry" wait_for 60 \
  grep -m1 -E "Connection changed.*driverName=\"$DRIVER\".*connected=true" "$STATE/logs/kubelet.log"
agent_logged_registered() {
  kubectl -n erdma-system logs ds/erdma-agent | grep -m1 'DRA driver registered with the kubelet'
}
must "and told the agent so (NotifyRegistrationStatus)" wait_for 30 agent_logged_registered
must "one ResourceSlice for the node with both cards" wait_for 60 devices_are "erdma-0 erdma-1"
check "the slice's devices carry the attributes a claim selects on" attributes_published
slices_owned_by_node() {
  kubectl get resourceslices -o jsonpath='{.items[*].metadata.ownerReferences[0].kind}' | grep -qw Node
}
check "the slice is owned by the Node (garbage-collected with it)" slices_owned_by_node
no_device_plugin_erdma() {  # NODE: no aliyun/erdma allocatable on the node, or 0
  [ -z "$(kubectl get node "$1" -o jsonpath='{.status.allocatable.aliyun/erdma}')" ] ||
    [ "$(kubectl get node "$1" -o jsonpath='{.status.allocatable.aliyun/erdma}')" = 0 ]
}
check "the device plugin does not offer aliyun/erdma here (extendedResource: true)" no_device_plugin_erdma "$NODE"

# ---------------------------------------------------------------------------------------------
# The agent's credentials: RBAC without pods get, resourceslices get or events patch, and the
# ValidatingAdmissionPolicy of manifests/dra/slice-policy.yaml, which limits its slice writes to
# its own node. Tried with tokens for the agent's service account: one bound to the agent's pod
# (as the kubelet projects it: the API server adds the pod's node to the user info), one bound to
# nothing.
phase "the agent's credentials: its own node's slices, no pods"
AGENT_SA=system:serviceaccount:erdma-system:erdma-agent
# agent_kubeconfig NAME TOKEN: a kubeconfig at $work/NAME.kubeconfig that authenticates with TOKEN
# only (the admin's one has a client certificate, which the API server would take first).
agent_kubeconfig() {
  local server
  server=$(kubectl config view --minify -o jsonpath='{.clusters[0].cluster.server}')
  printf '%s\n' 'apiVersion: v1' 'kind: Config' \
    "clusters: [{name: c, cluster: {server: \"$server\", certificate-authority: \"$STATE/pki/ca.crt\"}}]" \
    "users: [{name: u, user: {token: \"$2\"}}]" 'contexts: [{name: c, context: {cluster: c, user: u}}]' \
    'current-context: c' >"$work/$1.kubeconfig"
}
# probe_slice NAME NODE: a ResourceSlice of another driver's (the agent's publisher never sees it).
probe_slice() {
  printf '%s\n' 'apiVersion: resource.k8s.io/v1' 'kind: ResourceSlice' "metadata: {name: $1}" 'spec:' \
    '  driver: probe.erdma.test' "  nodeName: $2" '  pool: {name: probe, generation: 1, resourceSliceCount: 1}' \
    '  devices: []'
}
# as_agent NAME CMD...: kubectl CMD with $work/NAME.kubeconfig.
as_agent() { local k=$1; shift; kubectl --kubeconfig "$work/$k.kubeconfig" "$@"; }
# refused_with NAME TEXT CMD...: kubectl CMD as NAME fails, saying TEXT.
refused_with() {
  local k=$1 text=$2 out
  shift 2
  out=$(as_agent "$k" "$@" 2>&1) && { echo "accepted: $out"; return 1; }
  echo "$out"
  grep -qF "$text" <<<"$out"
}
agent_pod=$(kubectl -n erdma-system get pod -l app.kubernetes.io/name=erdma-agent -o jsonpath='{.items[0].metadata.name}')
agent_uid=$(kubectl -n erdma-system get pod "$agent_pod" -o jsonpath='{.metadata.uid}')
# agent_tokens POD UID: $work/bound.token, bound to the pod, and $work/unbound.token, bound to nothing.
agent_tokens() {
  local t
  t=$(kubectl -n erdma-system create token erdma-agent --duration 10m --bound-object-kind Pod \
    --bound-object-name "$1" --bound-object-uid "$2") && [ -n "$t" ] && echo "$t" >"$work/bound.token" &&
    t=$(kubectl -n erdma-system create token erdma-agent --duration 10m) && [ -n "$t" ] && echo "$t" >"$work/unbound.token"
}
must "tokens for the agent's service account: bound to its pod $agent_pod, and bound to nothing" \
  agent_tokens "$agent_pod" "$agent_uid"
agent_kubeconfig bound "$(cat "$work/bound.token")"
agent_kubeconfig unbound "$(cat "$work/unbound.token")"
whoami_names_node() {  # NAME NODE: `kubectl auth whoami` as NAME ($work/NAME.kubeconfig) names NODE as its node
  as_agent "$1" auth whoami -o json | tee /dev/stderr |
    grep -A2 '"authentication.kubernetes.io/node-name"' | grep -q "\"$2\""
}
check "the pod-bound token carries the pod's node ($NODE) in its user info" whoami_names_node bound "$NODE"
check "as the agent of $NODE: a slice of another node is refused, with the policy's message" \
  refused_with bound "may write only that node's ResourceSlices" create -f - < <(probe_slice probe-other other-node)
own_slice_created_and_deleted() {  # NAME NODE: as NAME, a slice of NODE created, then deleted
  probe_slice probe-own "$2" | as_agent "$1" create -f - && as_agent "$1" delete resourceslice probe-own
}
check "as the agent of $NODE: a slice of its own node is created and deleted" own_slice_created_and_deleted bound "$NODE"
check "with a token bound to no pod: refused, the message says why" \
  refused_with unbound "this one names no node" create -f - < <(probe_slice probe-unbound "$NODE")
admin_created_slice() {  # NAME NODE: as the admin, the probe slice NAME of NODE created
  probe_slice "$1" "$2" | kubectl create -f - >/dev/null
}
must "as the admin, a slice of another node (the policy binds only the agent)" admin_created_slice probe-admin other-node
# (An update is a PUT: the agent's RBAC has update, not patch.)
update_and_delete_refused() {  # NAME SLICE: as NAME, the slice can be neither replaced nor deleted
  kubectl get resourceslice "$2" -o json >"$work/$2.json" &&
    refused_with "$1" "may write only" replace -f "$work/$2.json" &&
    refused_with "$1" "may write only" delete resourceslice "$2"
}
check "as the agent of $NODE: that node's slice cannot be updated or deleted" update_and_delete_refused bound probe-admin
kubectl delete resourceslice probe-admin >/dev/null 2>&1
# agent_can_i ANSWER "VERB RESOURCE"...: `kubectl auth can-i` as the agent answers ANSWER to each.
agent_can_i() {
  local want=$1 v a
  shift
  for v in "$@"; do
    # shellcheck disable=SC2086  # $v is two words, the verb and the resource
    a=$(kubectl auth can-i $v --as="$AGENT_SA" -A 2>/dev/null)
    echo "$v: $a"
    [ "$a" = "$want" ] || return 1
  done
}
agent_rbac() {
  agent_can_i no 'get pods' 'get resourceslices.resource.k8s.io' 'patch events' &&
    agent_can_i yes 'list resourceslices.resource.k8s.io' 'watch resourceslices.resource.k8s.io' 'create events'
}
check "RBAC: the agent reads no pods and no single slice, and patches no Events; it lists and watches slices" agent_rbac

# ---------------------------------------------------------------------------------------------
phase "a claim for every card"
kubectl create namespace "$NS" >/dev/null
cat >"$work/all-cards.yaml" <<EOF
apiVersion: resource.k8s.io/v1
kind: ResourceClaimTemplate
metadata: {name: erdma-all-cards, namespace: $NS}
spec:
  spec:
    devices:
      requests:
      - name: cards
        exactly: {deviceClassName: erdma.aliyun.com, allocationMode: All}
---
apiVersion: v1
kind: Pod
metadata: {name: nccl, namespace: $NS}
spec:
  terminationGracePeriodSeconds: 1
  resourceClaims:
  - {name: erdma, resourceClaimTemplateName: erdma-all-cards}
  containers:
  - name: rank
    image: $WORKLOAD
    imagePullPolicy: Never
    command: [sleep, "100000"]
    resources:
      claims: [{name: erdma}]
EOF
t1=$SECONDS
must "the pod with a ResourceClaimTemplate is created" kubectl apply -f "$work/all-cards.yaml"
must "it reaches Running (claim allocated by the scheduler, prepared by the agent)" \
  kubectl -n "$NS" wait --for=condition=Ready pod/nccl --timeout=180s
echo "     Ready $((SECONDS - t1)) s after creation"
nccl_claim=$(claim_of nccl)
nccl_uid=$(claim_uid "$nccl_claim")
claim_devices_are() {  # CLAIM WANT: the claim's allocated devices are WANT ("NAME NAME ...", a space after each)
  kubectl -n "$NS" get resourceclaim "$1" -o jsonpath='{range .status.allocation.devices.results[*]}{.device} {end}' |
    tee /dev/stderr | grep -qx "$2"
}
check "the claim is allocated both cards of the node" claim_devices_are "$nccl_claim" 'erdma-0 erdma-1 '
# in_pod_matches POD SCRIPT ERE: SCRIPT, run by sh in the pod, prints a line that ERE matches whole.
in_pod_matches() {
  in_pod "$1" "$2" | tee /dev/stderr | grep -Eqx "$3"
}
check "the container has exactly the two cards' uverbs and rdma_cm" \
  in_pod_matches nccl 'ls /dev/infiniband | sort | tr "\n" " "' 'rdma_cm uverbs0 uverbs1 '
# shellcheck disable=SC2016  # $NCCL_IB_HCA is the pod's, expanded by its sh
check "NCCL_IB_HCA names exactly the claim's cards (from the agent's CDI spec)" \
  in_pod_matches nccl 'echo $NCCL_IB_HCA' '=erdma_0,erdma_1'
check "the agent's CDI spec for the claim is in the node's /var/run/cdi" spec_file_for "$nccl_uid"
check "the agent's checkpoint records the claim" prepared "$nccl_uid"
# describe_says POD ERE: kubectl describe pod shows a line matching ERE (an Event).
describe_says() {
  kubectl -n "$NS" describe pod "$1" | grep -E "$2"
}
check "kubectl describe pod says which model served it and which cards (a Normal Event)" wait_for 30 \
  describe_says nccl "Normal +ErdmaClaimPrepared .*erdma-agent.*prepared by the DRA driver $DRIVER: rdma, cards erdma_0,erdma_1"
# network_data CLAIM: each device's interface and first IP in the claim's status, as the agent wrote
# them after preparing it; the agent's word on a write that failed otherwise.
network_data() {
  local got
  got=$(kubectl -n "$NS" get resourceclaim "$1" \
    -o jsonpath='{range .status.devices[*]}{.device}:{.networkData.interfaceName}:{.networkData.ips[0]} {end}')
  echo "status.devices: $got"
  [ "$got" = "erdma-0:eth0:10.255.0.1/24 erdma-1:eth0:10.255.0.1/24 " ] && return 0
  kubectl -n erdma-system logs ds/erdma-agent | grep -i "status" | tail -n 3
  return 1
}
check "the claim's status carries each card's network data (interface, IPs)" wait_for 30 network_data "$nccl_claim"
# pod_health POD: each allocated device's health in the pod's status, as the kubelet has it from
# the agent's health stream (ResourceHealthStatus): "<card>=<health>" per device, sorted.
pod_health() {
  kubectl -n "$NS" get pod "$1" \
    -o jsonpath='{range .status.containerStatuses[0].allocatedResourcesStatus[*].resources[*]}{.resourceID}={.health}{"\n"}{end}' |
    sed 's/.*-\(erdma_[0-9]*\)=/\1=/' | sort | tr '\n' ' '
}
health_is() {
  local got
  got=$(pod_health "$1")
  echo "health: $got"
  [ "$got" = "$2" ]
}
check "the pod's status shows both cards Healthy (the agent's health stream)" wait_for 60 \
  health_is nccl "erdma_0=Healthy erdma_1=Healthy "

# ---------------------------------------------------------------------------------------------
phase "aliyun/erdma: 1 the device-plugin way, served by DRA"
cat >"$work/extended.yaml" <<EOF
apiVersion: v1
kind: Pod
metadata: {name: legacy, namespace: $NS}
spec:
  terminationGracePeriodSeconds: 1
  containers:
  - name: c
    image: $WORKLOAD
    imagePullPolicy: Never
    command: [sleep, "100000"]
    resources:
      limits: {aliyun/erdma: 1}
EOF
check "a pod with aliyun/erdma: 1 and no claim is created" kubectl apply -f "$work/extended.yaml"
check "it reaches Running" kubectl -n "$NS" wait --for=condition=Ready pod/legacy --timeout=180s
legacy_claim=$(claim_of legacy)
legacy_uid=$(claim_uid "$legacy_claim" 2>/dev/null)
claim_on_driver() {  # CLAIM: a claim, allocated on this driver
  [ -n "$1" ] && kubectl -n "$NS" get resourceclaim "$1" -o jsonpath='{.status.allocation.devices.results[*].driver}' |
    tee /dev/stderr | grep -qx "$DRIVER"
}
check "the scheduler made it a claim on this driver (extendedResourceClaimStatus)" claim_on_driver "$legacy_claim"
check "the container has one card's uverbs and rdma_cm" \
  in_pod_matches legacy 'ls /dev/infiniband | sort | tr "\n" " "' 'rdma_cm uverbs[01] '

# ---------------------------------------------------------------------------------------------
phase "an Event a user sees"
# The webhook gives this pod the SMC-R resource; the node's kernel has no SMC, so the agent's pod
# setup fails, and with API access (manifests/dra) it says so on the pod.
kubectl label namespace "$NS" erdma-injection=enabled >/dev/null
cat >"$work/smcr.yaml" <<EOF
apiVersion: v1
kind: Pod
metadata:
  name: smcr
  namespace: $NS
  annotations: {network.alibabacloud.com/erdma-smcr: "true"}
spec:
  terminationGracePeriodSeconds: 1
  containers:
  - {name: c, image: $WORKLOAD, imagePullPolicy: Never, command: [sleep, "100000"]}
EOF
# applied_and_ready FILE POD TIMEOUT: FILE applied, then the pod POD of $NS is Ready within TIMEOUT.
applied_and_ready() { kubectl apply -f "$1" >/dev/null && kubectl -n "$NS" wait --for=condition=Ready "pod/$2" --timeout="$3"; }
check "an SMC-R pod is created and runs (the failed setup never fails the container)" \
  applied_and_ready "$work/smcr.yaml" smcr 120s
check "kubectl describe pod shows the agent's Warning with the reason" wait_for 60 \
  describe_says smcr 'Warning +SmcrSetupFailed .*erdma-agent.*SMC-R pod setup failed'
check "the SMC-R pod is deleted" kubectl -n "$NS" delete pod smcr --wait=true --timeout=60s

# ---------------------------------------------------------------------------------------------
phase "an agent restart keeps the prepared claims"
old_pod=$(kubectl -n erdma-system get pod -l app.kubernetes.io/name=erdma-agent -o jsonpath='{.items[0].metadata.name}')
check "the agent pod is deleted" kubectl -n erdma-system delete pod "$old_pod" --wait=true --timeout=60s
agent_pod_ready() {
  kubectl -n erdma-system get pod -l app.kubernetes.io/name=erdma-agent -o jsonpath='{.items[0].status.containerStatuses[0].ready}' |
    grep -qx true
}
check "a new agent pod is Ready" wait_for 120 agent_pod_ready
check "the checkpoint still records both claims" both prepared "$nccl_uid" "${legacy_uid:-none}"
both_running() {  # POD POD: both pods' phase is Running
  kubectl -n "$NS" get pod "$1" "$2" -o jsonpath='{.items[*].status.phase}' | grep -qx 'Running Running'
}
check "the workload pods kept running" both_running nccl legacy
# checkpoint_read_logged: the new agent's start-up line counts the claims its checkpoint file holds.
checkpoint_read_logged() {
  local want line
  want=$(on_node "cat $CHECKPOINT" | jq_py "len(d['claims'])") || return 1
  line=$(kubectl -n erdma-system logs ds/erdma-agent | grep -F "checkpoint read\"" | tail -n 1)
  echo "the file holds $want claims; the agent logged: $line"
  [ "$want" -ge 2 ] && grep -q "\"claims\":${want}[,}]" <<<"$line"
}
check "the agent logged the claims it found in its checkpoint" wait_for 30 checkpoint_read_logged

# ---------------------------------------------------------------------------------------------
phase "the slices repaired, cards gone and down"
first=$(node_slices | jq_py "d[0]['metadata']['name']")
first_uid=$(kubectl get resourceslice "$first" -o jsonpath='{.metadata.uid}')
# put_back: the slice exists again as a new object with both cards.
put_back() {
  local uid
  uid=$(kubectl get resourceslice "$first" -o jsonpath='{.metadata.uid}') || return 1
  [ -n "$uid" ] && [ "$uid" != "$first_uid" ] && devices_are "erdma-0 erdma-1"
}
check "a slice deleted by someone else" kubectl delete resourceslice "$first"
check "is put back by the agent (a new object)" wait_for 60 put_back
site_config "[{name: erdma_0, uverbs: uverbs0, netdev: eth0}]" &&
  check "the site's config without erdma_1 is applied" kubectl apply -k "$work/site"
check "the agent rolls out with it" agent_rolled_out
check "erdma_1 leaves the slice" wait_for 60 devices_are "erdma-0"
site_config "[{name: erdma_0, uverbs: uverbs0, netdev: eth0, state: DOWN}, {name: erdma_1, uverbs: uverbs1, netdev: eth0}]" &&
  check "the site's config with erdma_0 down and erdma_1 back is applied" kubectl apply -k "$work/site"
check "the agent rolls out with it" agent_rolled_out
taints_are() {  # WANT: each published device's first taint effect, "NAME=EFFECT NAME=EFFECT ..."
  kubectl get resourceslices -o jsonpath='{range .items[*].spec.devices[*]}{.name}={.taints[0].effect} {end}' |
    grep -qx "$1"
}
check "erdma_1 is back and erdma_0 is tainted NoSchedule" wait_for 60 taints_are 'erdma-0=NoSchedule erdma-1= '
check "the pod holding erdma_0 sees it Unhealthy in its status" wait_for 60 \
  health_is nccl "erdma_0=Unhealthy erdma_1=Healthy "
check "and a Warning Event saying which card of which claim is unavailable" wait_for 60 \
  describe_says nccl 'Warning +ErdmaCardUnavailable .*erdma-agent.*eRDMA card erdma_0 \(no port is ACTIVE\) of claim'

# ---------------------------------------------------------------------------------------------
phase "unprepare on pod deletion"
check "the pods are deleted" kubectl -n "$NS" delete pod nccl legacy --wait=true --timeout=120s
check "the claims leave the checkpoint" wait_for 60 both not_prepared "$nccl_uid" "${legacy_uid:-none}"
check "their CDI specs are removed" wait_for 30 both no_spec_file_for "$nccl_uid" "${legacy_uid:-none}"

# ---------------------------------------------------------------------------------------------
phase "who gets what: a quota per class, and an SMC-R class never gives raw RDMA"
# docs/dra.md, "Who gets what". A quota counts the devices a namespace's claims request, per class
# (<class>.deviceclass.resource.k8s.io/devices): 0 for the RDMA class keeps raw verbs out.
QNS=$NS-quota
cat >"$work/quota.yaml" <<EOF
apiVersion: v1
kind: Namespace
metadata: {name: $QNS}
---
apiVersion: v1
kind: ResourceQuota
metadata: {name: erdma, namespace: $QNS}
spec:
  hard:
    $DRIVER.deviceclass.resource.k8s.io/devices: "0"
    smcr.$DRIVER.deviceclass.resource.k8s.io/devices: "4"
EOF
claim_yaml() {  # NAME CLASS: a ResourceClaim of one device of CLASS in $QNS
  printf '%s\n' 'apiVersion: resource.k8s.io/v1' 'kind: ResourceClaim' "metadata: {name: $1, namespace: $QNS}" \
    'spec:' '  devices:' '    requests:' '    - name: card' "      exactly: {deviceClassName: $2}"
}
# refused_by_quota: creating a claim of the RDMA class fails, and the API server says it is the quota.
refused_by_quota() {
  local out
  if out=$(claim_yaml raw "$DRIVER" | kubectl create -f - 2>&1); then
    echo "created: $out"
    return 1
  fi
  echo "$out"
  grep -q 'exceeded quota: erdma' <<<"$out"
}
smcr_used() {  # the quota's usage counts the SMC-R claim's one device
  local used
  used=$(kubectl -n "$QNS" get resourcequota erdma -o json |
    /usr/bin/python3 -c "import json, sys; print(json.load(sys.stdin)['status'].get('used', {}).get('smcr.$DRIVER.deviceclass.resource.k8s.io/devices', ''))")
  echo "used: $used"
  [ "$used" = 1 ]
}
must "a namespace with a quota: no device of the RDMA class, four of the SMC-R class" kubectl apply -f "$work/quota.yaml"
# The quota's status is filled by the controller-manager: until then the quota admits nothing.
quota_ready() { [ -n "$(kubectl -n "$QNS" get resourcequota erdma -o jsonpath='{.status.hard}')" ]; }
must "the quota is in force (its status is filled)" wait_for 60 quota_ready
check "a claim of the RDMA class is refused there by the quota" refused_by_quota
claim_created() {  # NAME CLASS: a claim of CLASS created in $QNS
  claim_yaml "$1" "$2" | kubectl create -f - >/dev/null
}
check "a claim of the SMC-R class is created there" claim_created smcr "smcr.$DRIVER"
check "... and counted in the quota's usage" wait_for 60 smcr_used
# A site's own SMC-R class (config mode smcr, without the smcrCapable selector: this node's cards
# are static), and a claim whose own config asks mode rdma of it: the agent refuses to prepare it,
# and the kubelet says why on the pod.
cat >"$work/widen.yaml" <<EOF
apiVersion: resource.k8s.io/v1
kind: DeviceClass
metadata: {name: site-smcr.$DRIVER}
spec:
  selectors:
  - cel: {expression: 'device.driver == "$DRIVER"'}
  config:
  - opaque:
      driver: $DRIVER
      parameters: {apiVersion: $DRIVER/v1alpha1, kind: ErdmaConfig, mode: smcr}
---
apiVersion: resource.k8s.io/v1
kind: ResourceClaimTemplate
metadata: {name: widen, namespace: $NS}
spec:
  spec:
    devices:
      requests:
      - name: card
        exactly: {deviceClassName: site-smcr.$DRIVER}
      config:
      - opaque:
          driver: $DRIVER
          parameters: {apiVersion: $DRIVER/v1alpha1, kind: ErdmaConfig, mode: rdma}
---
apiVersion: v1
kind: Pod
metadata: {name: widen, namespace: $NS}
spec:
  terminationGracePeriodSeconds: 1
  resourceClaims:
  - {name: card, resourceClaimTemplateName: widen}
  containers:
  - name: main
    image: $WORKLOAD
    imagePullPolicy: Never
    command: [sleep, "100000"]
    resources:
      claims: [{name: card}]
EOF
must "a pod whose claim asks mode rdma of an SMC-R class is created" kubectl apply -f "$work/widen.yaml"
check "the agent refuses to prepare it: kubectl describe pod says a claim cannot turn SMC-R into raw RDMA" \
  wait_for 120 describe_says widen 'Warning +FailedPrepareDynamicResources .*never SMC-R into raw RDMA'
never_started() { [ -z "$(kubectl -n "$NS" get pod "$1" -o jsonpath='{.status.containerStatuses[0].state.running}')" ]; }  # POD
check "its container never started" never_started widen
widen_and_quota_deleted() {
  kubectl -n "$NS" delete pod widen --wait=true --timeout=60s >/dev/null &&
    kubectl delete deviceclass "site-smcr.$DRIVER" >/dev/null && kubectl delete namespace "$QNS" --wait=true --timeout=90s >/dev/null
}
check "the pod, the class and the quota's namespace are deleted" widen_and_quota_deleted

cluster_test_end
