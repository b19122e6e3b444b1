#!/usr/bin/env bash
# docs/upgrading.md followed end to end on the real one-node cluster: the release 0.1.0, built from
# its commit in this repository's history (test/cluster/build-release.sh, cached), installed with
# its own manifests and certificate tool, then upgraded to this tree in the order the page gives,
# while test/cluster/create_loop.py creates SMC-R pods (server-side dry runs) ten times a second:
#   1. the agents: the site overlay names the new agent image; the DaemonSet rolls;
#   2. the webhook: the overlay names the new webhook image too; the Deployment rolls;
#   3. the config: the overlay moves to this tree's manifests (the new keys).
# Checked: every create was admitted and mutated (0 failed), a pod started under 0.1.0 runs on
# through all three steps without a restart, a new SMC-R pod runs after each step, the node's
# agent reports the new version (erdma_agent_build_info), the webhook's pods run the new image,
# after step 2 an SMC-R container holds the new release's aliyun/erdma-smcr, and the certificate
# and caBundle 0.1.0's erdma-certs wrote are untouched. Each check prints PASS or FAIL with its
# evidence; the run ends with "upgrade: N passed, M failed" and exits 1 on any failure.
#
#   test/cluster/upgrade.sh [BUILD_DIR]      (root; default BUILD_DIR: build)
#
# Starts its own cluster and stops it at the end, whatever happens. Outside CI a machine that cannot
# run the cluster prints why and exits 0; under CI=true that is a failure.
set -uo pipefail
SRC=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
BUILD=$(cd "${1:-build}" 2>/dev/null && pwd) || { echo "upgrade: no build tree ${1:-build}" >&2; exit 1; }
CLUSTER=$SRC/scripts/cluster.sh
STATE=${ERDMA_CLUSTER_DIR:-/run/erdma-cluster}
NS=team-upgrade
# The release upgraded from: the last commit of 0.1.0 before 0.2's aliyun/erdma-smcr (CHANGELOG.md),
# whose agents advertise only aliyun/erdma. That difference is why the page puts the agents first.
FROM_COMMIT=0bd518e0db2fb01316d35ba90b42cd375735c9d6
FROM_VERSION=0.1.0
REGISTRY=registry.example.com/erdma-controller
# shellcheck source=test/cluster/lib.sh
. "$SRC/test/cluster/lib.sh"
CHECKS_NAME=upgrade
# shellcheck source=test/cluster/checks.sh
. "$SRC/test/cluster/checks.sh"
cluster_test_begin containerd runc ctr openssl curl git cmake ninja /usr/bin/python3 /usr/lib/cni/bridge
before_down() { [ -z "$load_pid" ] || load_stop; }
on_failure() { cluster_view; }
NEW_VERSION=$(sed -n 's/.*kVersion = "\([^"]*\)".*/\1/p' "$BUILD/generated/erdma/version.hpp")
[ -n "$NEW_VERSION" ] || { echo "upgrade: no version in $BUILD/generated/erdma/version.hpp" >&2; exit 1; }

# ---------------------------------------------------------------------------------------------
phase "$FROM_VERSION from its commit (built once per machine), then the cluster"
release=$(bounded 1800 "the build of $FROM_VERSION" "$SRC/test/cluster/build-release.sh" "$FROM_COMMIT" "$FROM_VERSION" |
  tail -n 1) || exit 1
release=${release%/}
echo "$FROM_VERSION: $release"
cluster_up || { echo "upgrade: scripts/cluster.sh up failed" >&2; exit 1; }

phase "images: $FROM_VERSION's from its own tree, $NEW_VERSION's from the build tree"
must "$NEW_VERSION's images built from $BUILD and imported into the node's containerd" product_images
release_images() {
  "$release/src/images/build-images.sh" --build-dir "$release/build" --out "$work/release-images" \
    erdma-agent erdma-webhook >/dev/null &&
    "$CLUSTER" import "$work/release-images/erdma-agent.tar" "$work/release-images/erdma-webhook.tar" >/dev/null &&
    "$CLUSTER" exec ctr -n k8s.io images ls -q | grep -F ":$FROM_VERSION"
}
must "$FROM_VERSION's images built by its own images/build-images.sh and imported" release_images

# ---------------------------------------------------------------------------------------------
phase "$FROM_VERSION installed with its own manifests and erdma-certs"
# $work/site is the user's overlay: first over the release's manifests (a copy, as a user keeps the
# release they run), then over this tree's.
site_over() {  # MANIFESTS: the site overlay over MANIFESTS/default, with a static device
  rm -rf "$work/site" && mkdir -p "$work/site" &&
    printf '%s\n' 'apiVersion: kustomize.config.k8s.io/v1beta1' 'kind: Kustomization' 'resources:' \
      "- ../$(basename "$1")/default" >"$work/site/kustomization.yaml" &&
    site_static_device "$work/site" "$1"
}
site_images() {  # AGENT_TAG WEBHOOK_TAG: the overlay names these image tags (the page's steps 1 and 2)
  printf '%s\n' 'images:' "- name: $REGISTRY/erdma-agent" "  newTag: \"$1\"" \
    "- name: $REGISTRY/erdma-webhook" "  newTag: \"$2\"" >>"$work/site/kustomization.yaml"
}
cp -r "$release/src/manifests" "$work/release-manifests"
must "the site overlay over $FROM_VERSION's manifests/default" site_over "$work/release-manifests"
install_release() {
  kubectl label node "$NODE" aliyun.accelerator/erdma=true --overwrite >/dev/null &&
    kubectl apply -k "$work/site" >/dev/null &&
    "$release/src/certs/erdma-certs" generate --dir "$work/pki" >/dev/null &&
    "$release/src/certs/erdma-certs" apply --dir "$work/pki" >/dev/null &&
    kubectl -n erdma-system rollout status daemonset/erdma-agent --timeout=180s &&
    kubectl -n erdma-system rollout status deployment/erdma-webhook --timeout=180s
}
must "kubectl apply -k, then $FROM_VERSION's erdma-certs generate and apply; both roll out" install_release
must "the agent registers aliyun/erdma" wait_for 60 capacity
images_running() {  # COMPONENT TAG: every pod of the component runs TAG, and there is at least one
  local images
  images=$(kubectl -n erdma-system get pods -l "app.kubernetes.io/name=$1" \
    -o jsonpath='{range .items[*]}{.status.containerStatuses[0].image}{"\n"}{end}')
  echo "$1: $(echo "$images" | tr '\n' ' ')"
  [ -n "$images" ] && ! echo "$images" | grep -qv ":$2\$"
}
both_run() { images_running erdma-agent "$1" && images_running erdma-webhook "$1"; }  # VERSION
check "the agent and the webhook run $FROM_VERSION" both_run "$FROM_VERSION"
ca_before=$(kubectl get mutatingwebhookconfiguration erdma-webhook -o jsonpath='{.webhooks[0].clientConfig.caBundle}')
secret_before=$(kubectl -n erdma-system get secret erdma-webhook-tls -o jsonpath='{.data.tls\.crt}')

kubectl create namespace "$NS" >/dev/null
kubectl label namespace "$NS" erdma-injection=enabled >/dev/null
smcr_pod() {  # NAME: an SMC-R pod created for real, Ready within 120 s
  kubectl apply -f - >/dev/null <<EOF || return 1
apiVersion: v1
kind: Pod
metadata:
  name: $1
  namespace: $NS
  annotations: {network.alibabacloud.com/erdma-smcr: "true"}
spec:
  terminationGracePeriodSeconds: 1
  containers: [{name: c, image: $WORKLOAD, imagePullPolicy: Never, command: [sleep, "100000"]}]
EOF
  kubectl -n "$NS" wait --for=condition=Ready "pod/$1" --timeout=120s
}
held() {  # POD: the extended resources its container holds, as "name=count ..."
  kubectl -n "$NS" get pod "$1" -o jsonpath='{.spec.containers[0].resources.limits}'
}
must "an SMC-R pod runs under $FROM_VERSION" smcr_pod before
holds() { held "$1" | tee /dev/stderr | grep -qF "\"$2\""; }  # POD RESOURCE
check "... and holds aliyun/erdma, what $FROM_VERSION gives SMC-R containers" holds before aliyun/erdma
before_uid=$(kubectl -n "$NS" get pod before -o jsonpath='{.metadata.uid}')
never_restarted() {  # the pod started under 0.1.0: the same object, Ready, its container never restarted
  local got
  got=$(kubectl -n "$NS" get pod before \
    -o jsonpath='{.metadata.uid} {.status.containerStatuses[0].restartCount} {.status.containerStatuses[0].ready}')
  echo "uid restarts ready: $got"
  [ "$got" = "$before_uid 0 true" ]
}

# ---------------------------------------------------------------------------------------------
phase "pods are created ten times a second from here to the end"
load_start
must "load running (the first create admitted)" wait_for 60 test -e "$work/started"

phase "step 1: the agents to $NEW_VERSION (the overlay names the new agent image)"
site_images "$NEW_VERSION" "$FROM_VERSION"
apply_site() {  # WORKLOAD...: kubectl apply -k the overlay, then each WORKLOAD rolls out
  local w
  kubectl apply -k "$work/site" >/dev/null || return 1
  for w in "$@"; do kubectl -n erdma-system rollout status "$w" --timeout=180s || return 1; done
}
must "kubectl apply -k with the new agent tag; the DaemonSet rolls out" apply_site daemonset/erdma-agent
agent_version() {  # VERSION: the node's agent reports it (erdma_agent_build_info)
  "$CLUSTER" exec curl -sf http://127.0.0.1:9467/metrics | grep '^erdma_agent_build_info' | tee /dev/stderr |
    grep -qF "version=\"$1\""
}
check "the node's agent reports $NEW_VERSION (erdma_agent_build_info)" wait_for 60 agent_version "$NEW_VERSION"
check "the webhook still runs $FROM_VERSION" images_running erdma-webhook "$FROM_VERSION"
check "the new agent registers aliyun/erdma again" wait_for 60 capacity
check "the pod started under $FROM_VERSION runs on, never restarted" never_restarted
check "a new SMC-R pod runs (the $FROM_VERSION webhook, the $NEW_VERSION agent)" smcr_pod step1

phase "step 2: the webhook to $NEW_VERSION, once every agent runs it"
sed -i '/^images:$/,$d' "$work/site/kustomization.yaml"
site_images "$NEW_VERSION" "$NEW_VERSION"
must "kubectl apply -k with the new webhook tag; the Deployment rolls out" apply_site deployment/erdma-webhook
check "every webhook pod runs $NEW_VERSION" wait_for 60 images_running erdma-webhook "$NEW_VERSION"
check "a new SMC-R pod runs (the new webhook, served by the new agent)" smcr_pod step2
check "... and holds aliyun/erdma-smcr, what $NEW_VERSION gives SMC-R containers" holds step2 aliyun/erdma-smcr
check "the pod started under $FROM_VERSION runs on, never restarted" never_restarted

phase "step 3: the config, last (the overlay moves to $NEW_VERSION's manifests)"
cp -r "$SRC/manifests" "$work/manifests"
must "the site overlay over $NEW_VERSION's manifests/default (no image tags: the manifests name $NEW_VERSION)" \
  site_over "$work/manifests"
must "kubectl apply -k; both roll out" apply_site daemonset/erdma-agent deployment/erdma-webhook
check "the agent still reports $NEW_VERSION" agent_version "$NEW_VERSION"
check "every agent and webhook pod runs $NEW_VERSION" both_run "$NEW_VERSION"
new_config() {  # the webhook's config has the key 0.2 added, and its configuration the new match condition
  local cm
  cm=$(kubectl -n erdma-system get deployment erdma-webhook \
    -o jsonpath='{.spec.template.spec.volumes[?(@.configMap)].configMap.name}') || return 1
  echo "the webhook's ConfigMap: $cm"
  kubectl -n erdma-system get configmap "$cm" -o jsonpath='{.data}' | grep -q 'resourceName: aliyun/erdma-smcr' &&
    kubectl get mutatingwebhookconfiguration erdma-webhook -o jsonpath='{.webhooks[0].matchConditions[*].name}' |
    tee /dev/stderr | tr ' ' '\n' | grep -qx asks-for-smcr
}
check "the new config is in force (the webhook's smcr.resourceName, the asks-for-smcr match condition)" new_config
check "a new SMC-R pod runs" smcr_pod step3
check "the pod started under $FROM_VERSION runs on, never restarted" never_restarted

load_stop
check "every create during the upgrade was admitted and mutated (0 failed)" load_verdict
certificates_untouched() {
  [ "$(kubectl get mutatingwebhookconfiguration erdma-webhook -o jsonpath='{.webhooks[0].clientConfig.caBundle}')" = "$ca_before" ] &&
    [ "$(kubectl -n erdma-system get secret erdma-webhook-tls -o jsonpath='{.data.tls\.crt}')" = "$secret_before" ]
}
check "the caBundle and the Secret $FROM_VERSION's erdma-certs wrote are untouched" certificates_untouched

cluster_test_end
