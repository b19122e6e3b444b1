#!/usr/bin/env bash
# The user's journey on a real cluster: a real kube-apiserver, scheduler, controller-manager and
# kubelet (scripts/cluster.sh), the product installed the way README.md tells a user, and every
# Kubernetes-facing promise checked against the real components. Each check prints PASS or FAIL
# with its evidence; the run ends with "N passed, M failed" and exits 1 on any failure.
#
#   test/cluster/journey.sh [BUILD_DIR]      (root; default BUILD_DIR: build)
#
# It starts its own cluster (and stops it at the end, whatever happens), so no cluster may be up.
# The node has no eRDMA hardware: a site overlay (the README's way to change a setting) gives the
# agent one static device, erdma_0 on uverbs0, and the node's view of /dev (the sandbox's, never
# this machine's) gets the two character devices Allocate passes to containers. The kernel here
# has no SMC: the agent's SMC-R pod setup then ends "failed" with that reason, which the checks
# expect and print. After the kustomize install and its uninstall come faults while pods are being
# created (certificate rotation and CA change, a rolling restart, the webhook scaled to 0, the
# kubelet restarted, the agent's pod deleted), then the Helm chart: install, upgrade under load,
# uninstall. Outside CI a machine that cannot run the cluster prints why and exits 0; under
# CI=true that is a failure.
set -uo pipefail
SRC=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
BUILD=$(cd "${1:-build}" 2>/dev/null && pwd) || { echo "journey: no build tree ${1:-build}" >&2; exit 1; }
CLUSTER=$SRC/scripts/cluster.sh
STATE=${ERDMA_CLUSTER_DIR:-/run/erdma-cluster}
NS=team-a
# shellcheck source=test/cluster/lib.sh
. "$SRC/test/cluster/lib.sh"
CHECKS_NAME=journey
# shellcheck source=test/cluster/checks.sh
. "$SRC/test/cluster/checks.sh"
cluster_test_begin containerd runc ctr openssl curl /usr/bin/python3 /usr/lib/cni/bridge
# helm keeps its config, cache and data under $HOME by default; here they are the run's own.
export HELM_CONFIG_HOME=$work/helm/config HELM_CACHE_HOME=$work/helm/cache HELM_DATA_HOME=$work/helm/data
before_down() { [ -z "$load_pid" ] || load_stop; }
on_failure() { cluster_view; }

# ---------------------------------------------------------------------------------------------
phase "cluster"
t0=$SECONDS
cluster_up || { echo "journey: scripts/cluster.sh up failed" >&2; exit 1; }
echo "cluster up in $((SECONDS - t0)) s; $(kubectl version 2>/dev/null | tr '\n' ' ')"

phase "images"
must "images built from the build tree and imported into the node's containerd" product_images

# ---------------------------------------------------------------------------------------------
# The README's own quick start, read from README.md, so the two cannot drift apart: its
# site/kustomization.yaml and each of its commands, run in $work (the "repository" there has the
# copy of manifests/ and certs/). Two things are this machine's: the node has no eRDMA card (the
# site also gets the agent's config with a static device), and the images the README's overlay
# names are the ones built here, tagged with those names in the node's containerd.
phase "install with README.md's quick start, its commands read from README.md"
# quick_start LANG: the first ```LANG block of README.md's "## Quick start" section.
quick_start() {
  awk -v fence='```'"$1" '/^## /{q = ($0 == "## Quick start")} q && !b && $0 == fence {b = 1; next} b && /^```/ {exit} b' \
    "$SRC/README.md"
}
readme_site() {
  cp -r "$SRC/manifests" "$work/manifests" && ln -s "$SRC/certs" "$work/certs" && mkdir -p "$work/site" &&
    quick_start yaml >"$work/site/kustomization.yaml" && cat "$work/site/kustomization.yaml" &&
    grep -q '^- \.\./manifests/default' "$work/site/kustomization.yaml" && site_static_device "$work/site"
}
must "README's site/kustomization.yaml beside a copy of manifests/ (and a static device)" readme_site
version=$(sed -n 's|^ *image: .*/erdma-webhook:||p' "$SRC/manifests/base/webhook-deployment.yaml")
readme_images() {  # each `name` -> `newName` of the README's overlay, as a tag of the image built here
  local from to n=0
  while read -r from to; do
    "$CLUSTER" exec ctr -n k8s.io images tag --force "$from:$version" "$to:$version" || return 1
    n=$((n + 1))
  done < <(awk '/^- name: /{name = $3} /^  newName: /{print name, $2}' "$work/site/kustomization.yaml")
  [ "$n" -eq 2 ]
}
must "the README's two image names tag the images built here ($version)" readme_images
n_commands=0
while IFS= read -r cmd; do
  n_commands=$((n_commands + 1))
  # The command is README.md's text, not this script's, so it runs through bash -c as a user's shell would.
  must "README: $cmd" bounded 240 "README's '$cmd'" bash -c "cd '$work' && $cmd"
done < <(quick_start sh | grep -v '^#' | sed -e 's/[[:space:]]\{2,\}#.*$//' -e "s/\bNODE\b/$NODE/g")
must "the quick start ran its six commands" test "$n_commands" -eq 6
ln -s erdma-pki "$work/pki"
must "the real kubelet shows aliyun/erdma capacity registered by the agent" wait_for 60 capacity

# ---------------------------------------------------------------------------------------------
phase "the seed's workloads"
kubectl create namespace "$NS" >/dev/null
check "opt in with kubectl label namespace" kubectl label namespace "$NS" erdma-injection=enabled
# nvidia.com/gpu made schedulable: an extended resource advertised on the node's status.
kubectl patch node "$NODE" --subresource=status --type=json \
  -p '[{"op":"add","path":"/status/capacity/nvidia.com~1gpu","value":"8"}]' >/dev/null
cat >"$work/nccl.yaml" <<EOF
apiVersion: apps/v1
kind: StatefulSet
metadata: {name: nccltest, namespace: $NS}
spec:
  serviceName: nccltest
  replicas: 1
  selector: {matchLabels: {app: nccltest}}
  template:
    metadata: {labels: {app: nccltest}}
    spec:
      hostNetwork: true
      terminationGracePeriodSeconds: 1
      containers:
      - name: nccltest
        image: $WORKLOAD
        imagePullPolicy: Never
        command: ["sleep", "100000"]
        resources:
          limits: {aliyun/erdma: 1, nvidia.com/gpu: 8}
EOF
cat >"$work/smcr.yaml" <<EOF
apiVersion: apps/v1
kind: Deployment
metadata: {name: smcr-app, namespace: $NS}
spec:
  replicas: 1
  selector: {matchLabels: {app: smcr-app}}
  template:
    metadata:
      labels: {app: smcr-app}
      annotations: {network.alibabacloud.com/erdma-smcr: "true"}
    spec:
      terminationGracePeriodSeconds: 1
      containers:
      - name: app
        image: $WORKLOAD
        imagePullPolicy: Never
        command: ["sleep", "100000"]
EOF
"$CLUSTER" exec sh -c '[ -e /dev/infiniband/uverbs1 ] || mknod -m 666 /dev/infiniband/uverbs1 c 231 193'
check "the NCCL StatefulSet and the SMC-R Deployment are created" kubectl apply -f "$work/nccl.yaml" -f "$work/smcr.yaml"
check "the NCCL pod reaches Running" kubectl -n "$NS" wait --for=condition=Ready pod/nccltest-0 --timeout=180s
check "the SMC-R pod reaches Running" kubectl -n "$NS" wait --for=condition=Ready pod -l app=smcr-app --timeout=180s
smcr_pod=$(kubectl -n "$NS" get pod -l app=smcr-app -o jsonpath='{.items[0].metadata.name}')
# From here on, each check's command is a function defined just above it (check runs it in a
# subshell with pipefail off: test/cluster/checks.sh).
# The node also has uverbs1, a card the agent does not offer (its config names erdma_0 on uverbs0
# only): an unprivileged container sees exactly the device nodes Allocate gave it.
nccl_pod_sees_only_its_devices() {
  "$CLUSTER" exec ls /dev/infiniband | tr '\n' ' ' | grep -qx 'rdma_cm uverbs0 uverbs1 ' || return 1
  out=$(kubectl -n "$NS" exec nccltest-0 -- ls /dev/infiniband/ | tr '\n' ' ') && echo "$out" && [ "$out" = 'rdma_cm uverbs0 ' ]
}
check "the unprivileged NCCL pod sees exactly rdma_cm and uverbs0 of the node's rdma_cm, uverbs0, uverbs1" \
  nccl_pod_sees_only_its_devices
nccl_pod_has_nccl_env() {
  out=$(kubectl -n "$NS" exec nccltest-0 -- env | grep '^NCCL_') && echo "$out" && grep -qx NCCL_IB_HCA==erdma_0 <<<"$out"
}
check "the NCCL pod has the NCCL environment of the agent's Allocate answer" nccl_pod_has_nccl_env
smcr_pod_preloads_the_library() {  # POD
  local out
  # shellcheck disable=SC2016  # $LD_PRELOAD is the container's, expanded by its sh
  out=$(kubectl -n "$NS" exec "$1" -- sh -c 'echo LD_PRELOAD=$LD_PRELOAD; head -c 4 /usr/lib/smc/libsmc-preload.so |
    od -An -c | tr -d " "; wc -c < /usr/lib/smc/libsmc-preload.so') || return 1
  echo "$out"
  grep -q '^LD_PRELOAD=.*/usr/lib/smc/libsmc-preload.so' <<<"$out" && grep -qx '177ELF' <<<"$out" &&
    [ "$(tail -n 1 <<<"$out")" -gt 10000 ]
}
check "the SMC-R pod has LD_PRELOAD and reads the library (an ELF file) through the Allocate mount" \
  smcr_pod_preloads_the_library "$smcr_pod"
smcr_pod_holds_smcr_and_no_device() {  # POD
  kubectl -n "$NS" get pod "$1" -o jsonpath='{.spec.containers[0].resources.limits}' | tee /dev/stderr |
    grep -q 'aliyun/erdma-smcr' &&
  ! kubectl -n "$NS" exec "$1" -- sh -c 'ls /dev/infiniband/ 2>/dev/null' | tee /dev/stderr | grep -q .
}
check "the SMC-R pod holds aliyun/erdma-smcr and has no RDMA device (SMC-R is the kernel's)" \
  smcr_pod_holds_smcr_and_no_device "$smcr_pod"
node_capacity_is() {  # RESOURCE COUNT: the node's capacity of RESOURCE is COUNT
  local c
  c=$(kubectl get node "$NODE" -o jsonpath="{.status.capacity.$1}"); echo "capacity $c"; [ "$c" = "$2" ]
}
check "the node offers the SMC-R resource: 256 slots per device" node_capacity_is aliyun/erdma-smcr 256
smcr_pod_says_what_was_injected() {  # POD
  kubectl -n "$NS" get pod "$1" -o jsonpath='{.metadata.annotations}' | tee /dev/stderr |
    grep -q 'network.alibabacloud.com/erdma-injected'
}
check "the SMC-R pod's annotations say what was injected and why" smcr_pod_says_what_was_injected "$smcr_pod"

# ---------------------------------------------------------------------------------------------
phase "the webhook's filters on the real apiserver"
# The webhook's request counter, summed over its replicas, read through the apiserver's proxy.
requests() {
  local total=0 p n
  for p in $(kubectl -n erdma-system get pod -l app.kubernetes.io/name=erdma-webhook -o name); do
    n=$(kubectl get --raw "/api/v1/namespaces/erdma-system/pods/${p#pod/}:8080/proxy/metrics" |
      awk '/^erdma_webhook_admission_requests_total/ {s += $2} END {printf "%d", s}') || return 1
    total=$((total + n))
  done
  echo "$total"
}
kubectl create namespace plain >/dev/null
before=$(requests)
dry() { kubectl create --dry-run=server -o name -f - ; }
smcr_pod_yaml() {  # NAMESPACE NAME [extra annotation]
  printf 'apiVersion: v1\nkind: Pod\nmetadata:\n  name: %s\n  namespace: %s\n  annotations:\n    network.alibabacloud.com/erdma-smcr: "true"\n%s\nspec:\n  containers: [{name: c, image: %s, command: [sleep, "100000"]}]\n' \
    "$2" "$1" "${3:-}" "$WORKLOAD"
}
# An eRDMA-only (NCCL) pod among them: the default config gives it nothing, so it is not sent
# (docs/admission.md, "Which pods the apiserver sends").
unmatched_pods_are_created() {
  smcr_pod_yaml plain unlabelled | dry &&
  smcr_pod_yaml "$NS" opted-out '    network.alibabacloud.com/erdma-inject: "false"' | dry &&
  smcr_pod_yaml kube-system system | dry &&
  printf 'apiVersion: v1\nkind: Pod\nmetadata: {name: nothing, namespace: %s}\nspec:\n  containers: [{name: c, image: %s}]\n' \
    "$NS" "$WORKLOAD" | dry &&
  printf 'apiVersion: v1\nkind: Pod\nmetadata: {name: nccl-only, namespace: %s}\nspec:\n  containers: [{name: c, image: %s, resources: {limits: {aliyun/erdma: 1}}}]\n' \
    "$NS" "$WORKLOAD" | dry
}
check "pods the webhook must not see, an NCCL-only pod among them, are created without it" unmatched_pods_are_created
after=$(requests)
check "... and its request counter did not move ($before before, $after after)" test "$before" = "$after"
matched_pod_moves_the_counter() {  # COUNT: the counter before
  smcr_pod_yaml "$NS" matched | dry >/dev/null && n=$(requests) && echo "counter $n" && [ "$n" -gt "$1" ]
}
check "a matched pod is sent to it (the counter moves)" matched_pod_moves_the_counter "$after"
apply_prints_the_warnings() {
  smcr_pod_yaml "$NS" bare | kubectl apply -f - 2>&1 | tee /dev/stderr | grep -q '^Warning: added aliyun/erdma-smcr: 1'
}
check "kubectl apply prints the webhook's warnings for a bare pod" apply_prints_the_warnings
describe_shows_the_warnings() {  # POD
  kubectl -n "$NS" describe pod "$1" | tee /dev/stderr | grep -q 'erdma-warnings'
}
check "kubectl describe shows the warnings of a controller-made pod" describe_shows_the_warnings "$smcr_pod"

# ---------------------------------------------------------------------------------------------
phase "Pod Security"
psa_admits_the_mutated_smcr_pod() {  # LEVEL: in namespace psa-LEVEL
  cat <<EOF | kubectl apply -f - 2>&1
apiVersion: v1
kind: Pod
metadata:
  name: compliant
  namespace: psa-$1
  annotations: {network.alibabacloud.com/erdma-smcr: "true"}
spec:
  securityContext: {runAsNonRoot: true, runAsUser: 1000, seccompProfile: {type: RuntimeDefault}}
  containers:
  - name: app
    image: $WORKLOAD
    command: [sleep, '100000']
    securityContext: {allowPrivilegeEscalation: false, capabilities: {drop: [ALL]}}
EOF
  kubectl -n "psa-$1" get pod compliant -o jsonpath='{.metadata.annotations.network\.alibabacloud\.com/erdma-injected}' |
    tee /dev/stderr | grep -q smcr-preload
}
for level in baseline restricted; do
  kubectl create namespace "psa-$level" >/dev/null
  kubectl label namespace "psa-$level" erdma-injection=enabled "pod-security.kubernetes.io/enforce=$level" >/dev/null
  check "a namespace enforcing $level admits the mutated SMC-R pod of a compliant spec" \
    psa_admits_the_mutated_smcr_pod "$level"
done
agent_runs_at_its_namespace_level() {
  kubectl get namespace erdma-system -o jsonpath='{.metadata.labels.pod-security\.kubernetes\.io/enforce}'; echo
  kubectl -n erdma-system get ds erdma-agent -o jsonpath='{.status.numberReady}/{.status.desiredNumberScheduled}' | grep -qx 1/1
}
check "the agent runs at its own namespace's Pod Security level" agent_runs_at_its_namespace_level

# ---------------------------------------------------------------------------------------------
phase "the agent's own commands on the real cluster"
# The node is this machine: each check asserts the one outcome its kernel must give. Without the
# erdma driver, status says so and exits 1; without SMC, smc-status and pnet list name the missing
# module and fail, and the pod setup ends "failed" with that reason. With them, all succeed.
agent_status_judges_the_node() {
  local out rc
  out=$(kubectl -n erdma-system exec ds/erdma-agent -- erdma-agent status 2>&1); rc=$?; echo "$out"
  grep -q 'erdma_0 .*Healthy' <<<"$out" || return 1
  if [ -d /sys/module/erdma ]; then [ "$rc" -eq 0 ]
  else [ "$rc" -eq 1 ] && grep -q 'the erdma kernel module is not loaded' <<<"$out"; fi
}
check "erdma-agent status in the agent's pod reads the DaemonSet's config and judges the node" agent_status_judges_the_node
smc_status_answers_for() {  # POD
  local out rc
  out=$(kubectl -n erdma-system exec ds/erdma-agent -- erdma-agent smc-status --pod "$NS/$1" 2>&1); rc=$?
  echo "$out"
  if [ -d /sys/module/smc_diag ]; then [ "$rc" -eq 0 ]
  else [ "$rc" -ne 0 ] && grep -q 'the kernel has no SMC' <<<"$out"; fi
}
check "erdma-agent smc-status --pod for the SMC-R pod" smc_status_answers_for "$smcr_pod"
agent_logged_the_smcr_setup() {  # POD
  line=$(kubectl -n erdma-system logs ds/erdma-agent | grep 'SMC-R pod setup' | grep -F "$1" | tail -n 1)
  echo "$line"
  if [ -d /sys/module/smc ]; then grep -q '"result":"configured"' <<<"$line"
  else grep -q '"result":"failed"' <<<"$line" && grep -q 'has no SMC' <<<"$line"; fi
}
check "the agent logged the SMC-R pod's setup: configured, or failed for this kernel's missing SMC" \
  agent_logged_the_smcr_setup "$smcr_pod"

# ---------------------------------------------------------------------------------------------
phase "faults, while matched pods are being created"
# The create loop: load_start, load_stop and load_verdict (test/cluster/lib.sh).
# Every webhook replica serves the certificate of FILE (its log names the SHA-256 at start-up and
# at each reload).
serving_everywhere() {
  local sha p
  sha=$(openssl x509 -in "$1" -noout -fingerprint -sha256 | cut -d= -f2 | tr -d : | tr A-F a-f)
  for p in $(kubectl -n erdma-system get pod -l app.kubernetes.io/name=erdma-webhook -o name); do
    kubectl -n erdma-system logs "$p" | grep -q "$sha" && continue
    echo "$p does not serve $sha yet; its last certificate lines:"
    kubectl -n erdma-system logs "$p" | grep -E 'cert_sha256|certificate' | tail -n 3
    return 1
  done
}
certs() { "$SRC/certs/erdma-certs" "$@" --dir "$work/pki" >/dev/null; }
# certs_then_apply ARGS...: `erdma-certs ARGS`, then `erdma-certs apply`; both must exit 0.
certs_then_apply() { certs "$@" && certs apply; }
pem_body() { grep -v '^-----' | tr -d '\n'; }
# ca_bundle_is FILE...: the webhook configuration's caBundle holds exactly the certificates of FILEs.
ca_bundle_is() {
  local got want f
  got=$(kubectl get mutatingwebhookconfiguration erdma-webhook -o jsonpath='{.webhooks[0].clientConfig.caBundle}' |
    base64 -d | pem_body) || return 1
  want=$(for f in "$@"; do pem_body <"$f"; done)
  echo "caBundle: $(($(printf '%s' "$got" | wc -c) * 3 / 4)) bytes of DER, want $(($(printf '%s' "$want" | wc -c) * 3 / 4))"
  [ "$got" = "$want" ]
}

load_start
check "load running" wait_for 60 test -e "$work/started"
check "erdma-certs rotate, then apply" certs_then_apply rotate
check "serving certificate rotated (same CA): every replica serves the new one" \
  wait_for 300 serving_everywhere "$work/pki/tls.crt"
load_stop
check "... with zero failed pod creations" load_verdict

load_start
check "load running" wait_for 60 test -e "$work/started"
cp "$work/pki/ca.crt" "$work/old-ca.crt"
check "erdma-certs rotate --new-ca, then apply" certs_then_apply rotate --new-ca
check "... the caBundle holds the old CA, then the new one" ca_bundle_is "$work/old-ca.crt" "$work/pki/ca.crt"
check "erdma-certs rotate (from the new CA), then apply" certs_then_apply rotate
check "CA changed: every replica serves a certificate of the new CA" \
  wait_for 300 serving_everywhere "$work/pki/tls.crt"
check "erdma-certs finish, then apply" certs_then_apply finish
check "... the caBundle holds the new CA alone: the old one is gone" ca_bundle_is "$work/pki/ca.crt"
load_stop
check "... with zero failed pod creations throughout the CA change" load_verdict

load_start
check "load running" wait_for 60 test -e "$work/started"
kubectl -n erdma-system rollout restart deployment/erdma-webhook >/dev/null
check "rolling restart of the webhook Deployment completes" \
  kubectl -n erdma-system rollout status deployment/erdma-webhook --timeout=180s
load_stop
check "... with zero failed pod creations" load_verdict

kubectl -n erdma-system scale deployment/erdma-webhook --replicas=0 >/dev/null
no_webhook_replica_left() { [ -z "$(kubectl -n erdma-system get pod -l app.kubernetes.io/name=erdma-webhook -o name)" ]; }
check "webhook scaled to 0: no replica left" wait_for 120 no_webhook_replica_left
matched_pod_refused_naming_the_webhook() {
  out=$(smcr_pod_yaml "$NS" during-outage | kubectl create --dry-run=server -f - 2>&1) && return 1
  echo "$out"; grep -q 'failed calling webhook "pods.erdma-webhook.erdma-system.svc"' <<<"$out"
}
check "... a matched pod is refused, and the message names the webhook" matched_pod_refused_naming_the_webhook
plain_pod_created_during_outage() {
  printf 'apiVersion: v1\nkind: Pod\nmetadata: {name: plain-during-outage, namespace: %s}\nspec:\n  containers: [{name: c, image: %s}]\n' \
    "$NS" "$WORKLOAD" | kubectl create --dry-run=server -f -
}
check "... a pod that asks for nothing is still created" plain_pod_created_during_outage
nccl_pod_created_during_outage() {
  printf 'apiVersion: v1\nkind: Pod\nmetadata: {name: nccl-during-outage, namespace: %s}\nspec:\n  containers: [{name: c, image: %s, resources: {limits: {aliyun/erdma: 1}}}]\n' \
    "$NS" "$WORKLOAD" | kubectl create --dry-run=server -f -
}
check "... an NCCL-only pod (aliyun/erdma, no SMC-R) is still created" nccl_pod_created_during_outage
sed -e 's/name: smcr-app/name: after-outage/' -e 's/app: smcr-app/app: after-outage/g' "$work/smcr.yaml" |
  kubectl apply -f - >/dev/null
deployment_pods_refused() {
  kubectl -n "$NS" get events --field-selector reason=FailedCreate -o jsonpath='{.items[*].message}' |
    grep -o 'failed calling webhook "pods.erdma-webhook.erdma-system.svc"' | head -n 1 | grep .
}
check "... a Deployment's pods are refused meanwhile (FailedCreate)" wait_for 60 deployment_pods_refused
kubectl -n erdma-system scale deployment/erdma-webhook --replicas=2 >/dev/null
check "webhook back: its rollout completes" \
  kubectl -n erdma-system rollout status deployment/erdma-webhook --timeout=180s
after_outage_pod_is_mutated() {
  kubectl -n "$NS" get pod -l app=after-outage \
    -o jsonpath='{.items[0].metadata.annotations.network\.alibabacloud\.com/erdma-injected}' | grep smcr-preload
}
check "... and the Deployment's pod appears, mutated" wait_for 240 after_outage_pod_is_mutated

agent_log() { kubectl -n erdma-system logs ds/erdma-agent; }
registrations() { agent_log | grep -c '"msg":"registered with kubelet"'; }
before=$(registrations)
check "kubelet restarted" "$CLUSTER" restart kubelet
agent_registered_again() {  # COUNT: the registrations before
  n=$(registrations); echo "now $n"; [ "$n" -gt "$1" ]
}
check "... the agent registers again (registrations: $before before)" wait_for 120 agent_registered_again "$before"
check "... capacity is there again" wait_for 120 capacity
printf '%s\n' 'apiVersion: v1' 'kind: Pod' "metadata: {name: after-kubelet, namespace: $NS}" 'spec:' \
  '  terminationGracePeriodSeconds: 1' '  containers:' \
  "  - {name: c, image: $WORKLOAD, command: [sleep, '100000'], resources: {limits: {aliyun/erdma: 1}}}" \
  >"$work/after-kubelet.yaml"
new_pod_gets_its_devices() {
  kubectl apply -f "$work/after-kubelet.yaml" >/dev/null &&
  kubectl -n "$NS" wait --for=condition=Ready pod/after-kubelet --timeout=180s >/dev/null &&
  kubectl -n "$NS" exec after-kubelet -- ls /dev/infiniband/ | tee /dev/stderr | grep -qx uverbs0
}
check "... and a new pod gets its devices" new_pod_gets_its_devices

smcr_state() {
  kubectl -n "$NS" get pod "$smcr_pod" -o jsonpath='{.metadata.uid} {.status.containerStatuses[0].restartCount} {.status.phase}'
}
smcr_before=$(smcr_state)
old_agent=$(kubectl -n erdma-system get pod -l app.kubernetes.io/name=erdma-agent -o name)
kubectl -n erdma-system delete "$old_agent" --wait=true >/dev/null
check "agent pod deleted: the DaemonSet's new one runs" \
  kubectl -n erdma-system rollout status daemonset/erdma-agent --timeout=180s
agent_resynced_smcr_pods() {
  kubectl -n erdma-system logs ds/erdma-agent | grep '"msg":"SMC-R resync done"' | tail -n 1 | grep .
}
check "... and resyncs the SMC-R pods already running" wait_for 120 agent_resynced_smcr_pods
check "... running pods untouched (uid, restarts, phase: $smcr_before)" test "$(smcr_state)" = "$smcr_before"
pnet_table_has_no_duplicates() {
  out=$(kubectl -n erdma-system exec ds/erdma-agent -- erdma-agent pnet list 2>&1); rc=$?; echo "$out"
  if [ ! -d /sys/module/smc ]; then [ "$rc" -ne 0 ] && grep -q 'the kernel has no SMC' <<<"$out"; return; fi
  [ "$rc" -eq 0 ] && [ -z "$(sort <<<"$out" | uniq -d)" ]
}
check "... the node's pnet table has no duplicate entries (without SMC: pnet list says the kernel has none)" \
  pnet_table_has_no_duplicates
kubectl -n "$NS" delete deployment after-outage --wait=false >/dev/null
kubectl -n "$NS" delete pod after-kubelet --wait=false >/dev/null

# ---------------------------------------------------------------------------------------------
phase "uninstall as docs/uninstall.md says"
kubectl -n "$NS" delete statefulset nccltest --wait=true >/dev/null
kubectl -n "$NS" delete deployment smcr-app --wait=true >/dev/null
check "the webhook configuration goes first" kubectl delete mutatingwebhookconfiguration erdma-webhook
agent_daemonsets_deleted() {  # every agent DaemonSet, and each one's pods gone
  kubectl -n erdma-system delete daemonset -l app.kubernetes.io/name=erdma-agent --wait=true >/dev/null &&
  kubectl -n erdma-system wait --for=delete pod -l app.kubernetes.io/name=erdma-agent --timeout=120s
}
check "then the agent DaemonSets: no agent left to redo its node setup" agent_daemonsets_deleted
# manifests/mixed-pools on the one node, the way docs/node-preparation.md moves an install there
# (the agent DaemonSet already deleted): the node's pool label picks exactly one of the two agents.
pool_agents() {  # the agent DaemonSets' desired pod counts and the node of each running agent pod
  kubectl -n erdma-system get daemonset -l app.kubernetes.io/name=erdma-agent \
    -o jsonpath='{range .items[*]}{.metadata.name}={.status.desiredNumberScheduled} {end}'
  kubectl -n erdma-system get pod -l app.kubernetes.io/name=erdma-agent --field-selector status.phase=Running \
    -o jsonpath='{range .items[*]}{.metadata.labels.erdma-controller/pool}@{.spec.nodeName} {end}'
}
kubectl label node "$NODE" erdma-controller/pool=gpu --overwrite >/dev/null
mixed_pools_applied() {
  kubectl apply -k "$work/manifests/mixed-pools" >/dev/null && kubectl delete mutatingwebhookconfiguration erdma-webhook >/dev/null
}
check "manifests/mixed-pools applies" mixed_pools_applied
only_pool_agent_runs() {  # POOL (gpu or smcr): the node runs exactly that pool's agent, none of the other's
  local out gpu=0 smcr=0 other=gpu
  if [ "$1" = gpu ]; then gpu=1 other=smcr; else smcr=1; fi
  out=$(pool_agents); echo "$out"
  grep -q "erdma-agent=$smcr " <<<"$out" && grep -q "erdma-agent-gpu=$gpu " <<<"$out" && grep -q "$1@$NODE" <<<"$out" &&
    ! grep -q "$other@" <<<"$out"
}
check "... a node labelled pool=gpu runs exactly the GPU pool's agent" wait_for 120 only_pool_agent_runs gpu
kubectl label node "$NODE" erdma-controller/pool=smcr --overwrite >/dev/null
check "... relabelled pool=smcr, exactly the SMC-R pool's agent" wait_for 120 only_pool_agent_runs smcr
kubectl label node "$NODE" erdma-controller/pool- >/dev/null
check "... and both agent DaemonSets go before the cleanup" agent_daemonsets_deleted
# The site's cleanup overlay, as docs/uninstall.md says: manifests/cleanup with the site's agent
# config and the node's own pause image (the cluster has no registry.k8s.io).
PAUSE_IMAGE=$(sed -n 's/^PAUSE_IMAGE=//p' "$SRC/scripts/cluster.sh")
mkdir -p "$work/site-cleanup"
cp "$work/site/agent-config.yaml" "$work/site-cleanup/"
printf '%s\n' 'apiVersion: kustomize.config.k8s.io/v1beta1' 'kind: Kustomization' 'resources:' \
  '- ../manifests/cleanup' 'configMapGenerator:' '- name: erdma-agent-config' '  namespace: erdma-system' \
  '  behavior: replace' '  files:' '  - config.yaml=agent-config.yaml' 'images:' '- name: registry.k8s.io/pause' \
  "  newName: ${PAUSE_IMAGE%:*}" "  newTag: \"${PAUSE_IMAGE##*:}\"" >"$work/site-cleanup/kustomization.yaml"
cleanup_rolled_out() {
  kubectl apply -k "$work/site-cleanup" >/dev/null &&
  kubectl -n erdma-system rollout status daemonset/erdma-cleanup --timeout=180s
}
check "manifests/cleanup runs erdma-agent cleanup on the node (the agent image has no shell)" cleanup_rolled_out
cleanup_log_says_what_it_removed() {
  local out
  out=$(kubectl -n erdma-system logs -l app.kubernetes.io/name=erdma-cleanup -c cleanup --prefix --tail=-1) || return 1
  echo "$out"; grep -q ' removed$' <<<"$out" && ! grep -q '\] nothing to remove$' <<<"$out"
}
check "... and its log says what it removed (the agent ran there: there is something)" cleanup_log_says_what_it_removed
cleanup_again_removes_nothing() {
  kubectl -n erdma-system delete pod -l app.kubernetes.io/name=erdma-cleanup --wait=true >/dev/null &&
  kubectl -n erdma-system rollout status daemonset/erdma-cleanup --timeout=180s >/dev/null &&
  kubectl -n erdma-system logs -l app.kubernetes.io/name=erdma-cleanup -c cleanup --tail=-1 | tee /dev/stderr |
    grep -qx 'nothing to remove'
}
check "... run again: nothing to remove" cleanup_again_removes_nothing
cleanup_then_site_deleted() {
  kubectl delete -k "$work/site-cleanup" --ignore-not-found --wait=true --timeout=120s >/dev/null &&
  kubectl delete -k "$work/site" --ignore-not-found --wait=true --timeout=120s
}
check "kubectl delete -k removes the cleanup, then the rest with the namespace" cleanup_then_site_deleted
nothing_of_the_product_left() {
  left=$(kubectl get all,configmap,secret,serviceaccount,mutatingwebhookconfiguration -A -o name 2>/dev/null |
    grep -E 'erdma-(webhook|agent|cleanup)' || true); [ -z "$left" ] || { echo "$left"; return 1; }
  ! kubectl get namespace erdma-system 2>/dev/null
}
check "nothing of the product is left in the cluster" nothing_of_the_product_left
node_allocatable_is_zero() {
  local c
  c=$(kubectl get node "$NODE" -o jsonpath='{.status.allocatable.aliyun/erdma}'); echo "allocatable '$c'"; [ "${c:-0}" = 0 ]
}
check "the node's capacity goes back to zero once the agent is gone" wait_for 60 node_allocatable_is_zero

# ---------------------------------------------------------------------------------------------
phase "the Helm chart: install, upgrade while pods are being created, uninstall"
HELM=$("$SRC/test/helm/build-helm.sh" 2>/dev/null | tail -n 1)
SITE=(--set agent.config.devices.source=static
  --set-json 'agent.config.devices.static=[{"name":"erdma_0","uverbs":"uverbs0","netdev":"eth0"}]')
rm -rf "$work/pki"
must "helm install (the same static-device site as the overlay)" \
  "$HELM" install erdma-controller "$SRC/charts/erdma-controller" "${SITE[@]}"
erdma_certs_generate_and_apply() {
  "$SRC/certs/erdma-certs" generate --dir "$work/pki" && "$SRC/certs/erdma-certs" apply --dir "$work/pki"
}
must "erdma-certs generate and apply, as after kubectl apply -k" erdma_certs_generate_and_apply
chart_rolled_out() {
  kubectl -n erdma-system rollout status deployment/erdma-webhook --timeout=180s &&
  kubectl -n erdma-system rollout status daemonset/erdma-agent --timeout=180s
}
must "the chart's webhook and agent roll out" chart_rolled_out
check "the agent registers aliyun/erdma (64 slots)" wait_for 60 node_capacity_is aliyun/erdma 64
matched_pod_mutated_by_the_chart() {
  smcr_pod_yaml "$NS" helm-pod | kubectl create --dry-run=server -o jsonpath='{.metadata.annotations}' -f - |
    tee /dev/stderr | grep -q erdma-injected
}
check "a matched pod is mutated through the chart's webhook" matched_pod_mutated_by_the_chart
seed_workloads_run_under_the_chart() {
  kubectl apply -f "$work/nccl.yaml" -f "$work/smcr.yaml" >/dev/null &&
  kubectl -n "$NS" rollout status statefulset/nccltest --timeout=180s &&
  kubectl -n "$NS" rollout status deployment/smcr-app --timeout=180s &&
  kubectl -n "$NS" get pod -l app=smcr-app \
    -o jsonpath='{.items[0].metadata.annotations.network\.alibabacloud\.com/erdma-injected}' | grep smcr-preload
}
check "the seed's workloads run under the chart" seed_workloads_run_under_the_chart
kubectl -n "$NS" delete statefulset/nccltest deployment/smcr-app --wait=true >/dev/null
ca_before=$(kubectl get mutatingwebhookconfiguration erdma-webhook -o jsonpath='{.webhooks[0].clientConfig.caBundle}')
secret_before=$(kubectl -n erdma-system get secret erdma-webhook-tls -o jsonpath='{.data.tls\.crt}')
load_start
check "load running" wait_for 60 test -e "$work/started"
check "helm upgrade with a changed value (slotsPerDevice 32) completes" \
  "$HELM" upgrade erdma-controller "$SRC/charts/erdma-controller" "${SITE[@]}" \
  --set agent.config.slotsPerDevice=32 --wait --timeout 3m
load_stop
check "... with zero failed pod creations" load_verdict
# webhook_ca_and_cert_are CA CERT: the webhook configuration's caBundle is CA and the serving
# Secret's tls.crt is CERT (both base64, as the API returns them).
webhook_ca_and_cert_are() {
  [ "$(kubectl get mutatingwebhookconfiguration erdma-webhook -o jsonpath='{.webhooks[0].clientConfig.caBundle}')" = "$1" ] &&
  [ "$(kubectl -n erdma-system get secret erdma-webhook-tls -o jsonpath='{.data.tls\.crt}')" = "$2" ]
}
check "... the caBundle and the Secret that erdma-certs wrote are untouched" \
  webhook_ca_and_cert_are "$ca_before" "$secret_before"
check "... and the agent runs the new configuration (capacity 32)" wait_for 120 node_capacity_is aliyun/erdma 32
kubectl delete mutatingwebhookconfiguration erdma-webhook >/dev/null
chart_agent_cleaned_up_then_uninstalled() {
  kubectl -n erdma-system delete daemonset -l app.kubernetes.io/name=erdma-agent --wait=true >/dev/null &&
  kubectl -n erdma-system wait --for=delete pod -l app.kubernetes.io/name=erdma-agent --timeout=120s >/dev/null &&
  kubectl apply -k "$work/site-cleanup" >/dev/null &&
  kubectl -n erdma-system rollout status daemonset/erdma-cleanup --timeout=180s >/dev/null &&
  kubectl -n erdma-system logs -l app.kubernetes.io/name=erdma-cleanup -c cleanup --tail=-1 | grep -E ' removed$' &&
  kubectl delete -k "$work/site-cleanup" --wait=true --timeout=120s >/dev/null &&
  "$HELM" uninstall erdma-controller --wait --timeout 3m
}
check "the chart's agent goes, manifests/cleanup cleans the node, then helm uninstall (docs/uninstall.md)" \
  chart_agent_cleaned_up_then_uninstalled
chart_gone() {
  local left
  left=$(kubectl get all,configmap,secret,serviceaccount,mutatingwebhookconfiguration -A -o name 2>/dev/null |
    grep -E 'erdma-(webhook|agent|cleanup)' || true)
  [ -z "$left" ] || { echo "$left"; return 1; }
  [ -z "$("$HELM" list -A -q)" ] || { "$HELM" list -A; return 1; }
  ! kubectl get namespace erdma-system 2>/dev/null
}
check "nothing of the chart is left in the cluster" chart_gone

phase "the Helm chart with certificates generated at install"
check "helm install --set certificates.mode=generate --wait" \
  "$HELM" install erdma-controller "$SRC/charts/erdma-controller" "${SITE[@]}" \
  --set certificates.mode=generate --wait --timeout 3m
matched_pod_mutated_with_the_chart_ca() {
  smcr_pod_yaml "$NS" helm-gen-pod | kubectl create --dry-run=server -o jsonpath='{.metadata.annotations}' -f - |
    grep -q erdma-injected
}
check "a matched pod is mutated (the caBundle is the chart's)" matched_pod_mutated_with_the_chart_ca
gen_ca=$(kubectl get mutatingwebhookconfiguration erdma-webhook -o jsonpath='{.webhooks[0].clientConfig.caBundle}')
gen_cert=$(kubectl -n erdma-system get secret erdma-webhook-tls -o jsonpath='{.data.tls\.crt}')
upgrade_keeps_the_generated_certificate() {  # CA CERT: the caBundle and tls.crt before
  "$HELM" upgrade erdma-controller "$SRC/charts/erdma-controller" "${SITE[@]}" \
    --set certificates.mode=generate --set webhook.replicas=3 --wait --timeout 3m >/dev/null &&
  webhook_ca_and_cert_are "$1" "$2" &&
  kubectl -n erdma-system get deployment erdma-webhook -o jsonpath='{.status.readyReplicas}' | grep -qx 3
}
check "helm upgrade (3 webhook replicas) keeps the generated certificate and caBundle" \
  upgrade_keeps_the_generated_certificate "$gen_ca" "$gen_cert"
helm_uninstall_leaves_nothing() {
  "$HELM" uninstall erdma-controller --wait --timeout 3m >/dev/null; chart_gone
}
check "helm uninstall leaves nothing" helm_uninstall_leaves_nothing

cluster_test_end
