#!/usr/bin/env bash
# Builds the helm binary test/helm/test_chart.py runs, from the Go module pinned in this directory
# (go.mod and go.sum), into a cache outside the repository:
#   ${ERDMA_HELM_CACHE:-/var/cache/erdma-controller}/helm-<version>-<hash>/helm
# <hash> covers go.mod, go.sum, the build flags and the Go version, so a change to any of them
# builds a new directory; test/cluster/go-build-lib.sh (shared with test/cluster's build scripts)
# says how the directory is made and reused. The last line on stdout is the binary's path;
# progress goes to stderr.
#
#   test/helm/build-helm.sh            build if needed, print the binary's path
#   test/helm/build-helm.sh --print    print the path it would use, build nothing
#
# Needs Go >= 1.26 (/usr/local/go/bin is added to PATH) and the Go module proxy, or a module cache
# that already holds the modules. Go's own caches (go env GOMODCACHE, GOCACHE) are used as they
# are. On 2 cores the first build took 141 to 281 s (the longer with an empty Go build cache on a
# busy machine); with a warm Go build cache, 3 s.
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=../cluster/go-build-lib.sh
. "$HERE/../cluster/go-build-lib.sh"
GB_LOG=build-helm

# The release: keep in step with go.mod (the helm.sh/helm/v3 line).
HELM_VERSION=v3.22.0
# The Kubernetes version helm assumes without a cluster (`helm template`, `helm lint`): upstream's
# Makefile derives it from the client-go that helm requires (v0.37.0 -> 1.37).
K8S_MAJOR=1
K8S_MINOR=37

log() { gb_log "$@"; }
die() { gb_die "$@"; }

grep -q "helm.sh/helm/v3 $HELM_VERSION" "$HERE/go.mod" || die "go.mod does not pin helm.sh/helm/v3 $HELM_VERSION"
grep -q "k8s.io/client-go v0.$K8S_MINOR\." "$HERE/go.mod" || die "go.mod's k8s.io/client-go is not v0.$K8S_MINOR.x: update K8S_MINOR"

# As upstream's Makefile builds a release: static, no debug info, the version stamped. The commit
# is not known from the module, so it stays empty; "clean" because the module zip is the tag's tree.
pkg=helm.sh/helm/v3
ldflags="-s -w -X $pkg/internal/version.version=$HELM_VERSION -X $pkg/internal/version.metadata="
ldflags+=" -X $pkg/internal/version.gitCommit= -X $pkg/internal/version.gitTreeState=clean"
for p in $pkg/pkg/lint/rules $pkg/pkg/chartutil; do
  ldflags+=" -X $p.k8sVersionMajor=$K8S_MAJOR -X $p.k8sVersionMinor=$K8S_MINOR"
done

GB_NAME=helm GB_VERSION=$HELM_VERSION
GB_CACHE=${ERDMA_HELM_CACHE:-/var/cache/erdma-controller}
GB_FILES=("$HERE/go.mod" "$HERE/go.sum")
GB_KEY=$ldflags
GB_OUT=helm GB_DONE=helm
gb_build() {
  local tmp=$1 t0=$SECONDS got
  log "building helm $HELM_VERSION with $(go env GOVERSION); a cold build takes 2-5 minutes on 2 cores"
  (cd "$HERE" && go build -trimpath -ldflags "$ldflags" -o "$tmp/helm" helm.sh/helm/v3/cmd/helm)
  got=$("$tmp/helm" version --template '{{.Version}}')
  [ "$got" = "$HELM_VERSION" ] || die "helm version says '$got', expected $HELM_VERSION"
  log "helm built in $((SECONDS - t0)) s"
}
go_build_cached "$@"
