#!/usr/bin/env bash
# Builds the Kubernetes and etcd binaries scripts/cluster.sh runs, from Go modules pinned in this
# directory (k8s/go.mod, etcd/go.mod and their go.sum), into a cache outside the repository:
#   ${ERDMA_K8S_CACHE:-/var/cache/erdma-controller}/k8s-<release>-<hash>/bin
# with kube-apiserver, kube-controller-manager, kube-scheduler, kubelet, kubectl, kube-proxy and
# etcd. <hash> covers the go.mod and go.sum files, the build flags and the Go version, so a change
# to any of them builds a new directory; go-build-lib.sh (shared with build-containerd.sh and
# test/helm/build-helm.sh) says how the directory is made and reused. The last line on stdout is
# the bin directory; progress goes to stderr.
#
#   test/cluster/build-k8s.sh            build if needed, print the bin directory
#   test/cluster/build-k8s.sh --print    print the bin directory it would use, build nothing
#
# Needs Go >= 1.26 (/usr/local/go/bin is added to PATH) and the Go module proxy, or a module cache
# that already holds the modules. Go's own caches (go env GOMODCACHE, GOCACHE) are used as they
# are; a cold build takes about 12 minutes on 2 cores, with a warm Go build cache 20 s (test/cluster/README.md).
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=go-build-lib.sh
. "$HERE/go-build-lib.sh"
GB_LOG=build-k8s

# The release: keep in step with k8s/go.mod (require k8s.io/kubernetes, replace ... v0.37.2).
K8S_VERSION=v1.37.2
K8S_DATE=2026-10-27T12:01:04Z   # the release's time in the module proxy (go mod download -json)
ETCD_VERSION=v3.6.17

log() { gb_log "$@"; }
die() { gb_die "$@"; }

grep -q "k8s.io/kubernetes $K8S_VERSION" "$HERE/k8s/go.mod" || die "k8s/go.mod does not pin k8s.io/kubernetes $K8S_VERSION"
grep -q "go.etcd.io/etcd/server/v3 $ETCD_VERSION" "$HERE/etcd/go.mod" || die "etcd/go.mod does not pin etcd $ETCD_VERSION"

major=${K8S_VERSION#v}
major=${major%%.*}
minor=${K8S_VERSION#v*.}
minor=${minor%%.*}
# As upstream's hack/lib/golang.sh builds release binaries (static, no debug info, these tags),
# stamped as hack/lib/version.sh does. The commit is not known from the module, so it stays empty.
tags=selinux,notest,grpcnotrace
ldflags="-s -w"
for pkg in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
  ldflags+=" -X $pkg.gitVersion=$K8S_VERSION -X $pkg.gitMajor=$major -X $pkg.gitMinor=$minor"
  ldflags+=" -X $pkg.gitCommit= -X $pkg.gitTreeState=clean -X $pkg.buildDate=$K8S_DATE"
done
etcd_ldflags="-s -w -X go.etcd.io/etcd/api/v3/version.GitSHA=${ETCD_VERSION}-module"
k8s_cmds=(kube-apiserver kube-controller-manager kube-scheduler kubelet kubectl kube-proxy)

GB_NAME=k8s GB_VERSION=$K8S_VERSION
GB_CACHE=${ERDMA_K8S_CACHE:-/var/cache/erdma-controller}
GB_FILES=("$HERE/k8s/go.mod" "$HERE/k8s/go.sum" "$HERE/etcd/go.mod" "$HERE/etcd/go.sum")
GB_KEY="$tags $ldflags $etcd_ldflags ${k8s_cmds[*]}"
GB_OUT=bin GB_DONE=bin/kubelet
GB_INFO="kubernetes $K8S_VERSION etcd $ETCD_VERSION"
gb_build() {
  local tmp=$1 t0=$SECONDS t1
  mkdir "$tmp/bin"
  log "building Kubernetes $K8S_VERSION (${k8s_cmds[*]}) with $(go env GOVERSION); a cold build takes 12-20 min on 2 cores"
  (cd "$HERE/k8s" && go build -trimpath -tags "$tags" -ldflags "$ldflags" -o "$tmp/bin/" \
    "${k8s_cmds[@]/#/k8s.io/kubernetes/cmd/}")
  t1=$SECONDS
  log "Kubernetes built in $((t1 - t0)) s; building etcd $ETCD_VERSION"
  (cd "$HERE/etcd" && go build -trimpath -ldflags "$etcd_ldflags" -o "$tmp/bin/etcd" go.etcd.io/etcd/server/v3)
  log "etcd built in $((SECONDS - t1)) s"

  local got
  got=$("$tmp/bin/kubectl" version --client 2>&1 | sed -n 's/^Client Version: //p')
  [ "$got" = "$K8S_VERSION" ] || die "kubectl version --client says '$got', expected $K8S_VERSION"
  # Read whole, then matched: `etcd --version | grep -q` fails under pipefail whenever grep exits
  # at its match before etcd has written its last line (SIGPIPE), which a cold build hit.
  got=$("$tmp/bin/etcd" --version)
  case $got in *"etcd Version: ${ETCD_VERSION#v}"*) ;; *) die "etcd --version says '$got', expected ${ETCD_VERSION#v}" ;; esac
}
go_build_cached "$@"
