#!/usr/bin/env bash
# Builds the kwok controller bench/kwok-scale.sh runs, from the Go module pinned in this directory
# (go.mod and go.sum), into a cache outside the repository:
#   ${ERDMA_KWOK_CACHE:-/var/cache/erdma-controller}/kwok-<version>-<hash>/kwok
# <hash> covers go.mod, go.sum, the build flags and the Go version; test/cluster/go-build-lib.sh
# (shared with the Kubernetes, containerd and helm builds) says how the directory is made and
# reused. The last line on stdout is the binary's path; progress goes to stderr.
#
#   bench/kwok/build-kwok.sh            build if needed, print the binary's path
#   bench/kwok/build-kwok.sh --print    print the path it would use, build nothing
#
# Needs Go >= 1.26 (/usr/local/go/bin is added to PATH) and the Go module proxy, or a module cache
# that already holds the modules.
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=../../test/cluster/go-build-lib.sh
. "$HERE/../../test/cluster/go-build-lib.sh"
GB_LOG=build-kwok

# The release: keep in step with go.mod (the sigs.k8s.io/kwok line).
KWOK_VERSION=v0.8.0
grep -q "sigs.k8s.io/kwok $KWOK_VERSION" "$HERE/go.mod" || gb_die "go.mod does not pin sigs.k8s.io/kwok $KWOK_VERSION"

# As the release script stamps it: static, no debug info, the version without its "v".
ldflags="-s -w -X sigs.k8s.io/kwok/pkg/consts.Version=${KWOK_VERSION#v}"

GB_NAME=kwok GB_VERSION=$KWOK_VERSION
GB_CACHE=${ERDMA_KWOK_CACHE:-/var/cache/erdma-controller}
GB_FILES=("$HERE/go.mod" "$HERE/go.sum")
GB_KEY=$ldflags
GB_OUT=kwok GB_DONE=kwok
gb_build() {
  local tmp=$1 t0=$SECONDS
  gb_log "building kwok $KWOK_VERSION with $(go env GOVERSION); a cold build takes a few minutes on 2 cores"
  (cd "$HERE" && go build -trimpath -ldflags "$ldflags" -o "$tmp/kwok" sigs.k8s.io/kwok/cmd/kwok)
  "$tmp/kwok" --version 2>&1 | grep -q "${KWOK_VERSION#v}" || gb_die "kwok --version does not say ${KWOK_VERSION#v}"
  gb_log "kwok built in $((SECONDS - t0)) s"
}
go_build_cached "$@"
