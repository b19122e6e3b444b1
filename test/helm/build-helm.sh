#!/usr/bin/env bash
# Builds the helm binary test/helm/test_chart.py runs, from the Go module pinned in this directory
# (go.mod and go.sum), into a cache outside the repository:
#   ${ERDMA_HELM_CACHE:-/var/cache/erdma-controller}/helm-<version>-<hash>/helm
# <hash> covers go.mod, go.sum, the build flags and the Go version, so a change to any of them
# builds a new directory. The directory appears complete or not at all (built in a temporary
# directory, then renamed), so an interrupted build is never reused; a second run finds it and
# returns at once. The last line on stdout is the binary's path; progress goes to stderr.
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
export PATH=/usr/local/go/bin:$PATH

# The release: keep in step with go.mod (the helm.sh/helm/v3 line).
HELM_VERSION=v3.22.0
# The Kubernetes version helm assumes without a cluster (`helm template`, `helm lint`): upstream's
# Makefile derives it from the client-go that helm requires (v0.37.0 -> 1.37).
K8S_MAJOR=1
K8S_MINOR=37

log() { echo "build-helm: $*" >&2; }
die() { log "$*"; exit 1; }

command -v go >/dev/null || die "go not found (expected /usr/local/go/bin/go, Go >= 1.26)"
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

hash=$( { cat "$HERE/go.mod" "$HERE/go.sum"; echo "$ldflags"; go env GOVERSION; } | sha256sum | cut -c1-12)
cache=${ERDMA_HELM_CACHE:-/var/cache/erdma-controller}
dir=$cache/helm-$HELM_VERSION-$hash
if [ "${1:-}" = "--print" ]; then
  echo "$dir/helm"
  exit 0
fi
if [ -x "$dir/helm" ]; then
  log "reusing $dir"
  echo "$dir/helm"
  exit 0
fi

mkdir -p "$cache"
# One build at a time per cache (a lock of its own: build-k8s.sh's may be held for 12 minutes);
# a second caller waits for the first and then reuses its result.
exec 9>"$cache/.build-helm.lock"
flock 9
if [ -x "$dir/helm" ]; then
  log "reusing $dir (built by another run meanwhile)"
  echo "$dir/helm"
  exit 0
fi
rm -rf "$cache"/.tmp-helm-* # what an interrupted build left (the lock says none is running)
tmp=$(mktemp -d "$cache/.tmp-helm-$HELM_VERSION-$hash.XXXXXX")
trap 'rm -rf "$tmp"' EXIT

export CGO_ENABLED=0 GOFLAGS=-mod=readonly GOTOOLCHAIN=local
t0=$SECONDS
log "building helm $HELM_VERSION with $(go env GOVERSION); a cold build takes 2-5 minutes on 2 cores"
(cd "$HERE" && go build -trimpath -ldflags "$ldflags" -o "$tmp/helm" helm.sh/helm/v3/cmd/helm)

got=$("$tmp/helm" version --template '{{.Version}}')
[ "$got" = "$HELM_VERSION" ] || die "helm version says '$got', expected $HELM_VERSION"
{ echo "helm $HELM_VERSION $(go env GOVERSION)"
  echo "built $(date -u +%Y-%m-%dT%H:%M:%SZ) in $((SECONDS - t0)) s"; } > "$tmp/BUILDINFO"
chmod 755 "$tmp"
mv -T "$tmp" "$dir"
trap - EXIT
log "built in $((SECONDS - t0)) s: $(du -sh "$dir/helm" | cut -f1) in $dir"
echo "$dir/helm"
