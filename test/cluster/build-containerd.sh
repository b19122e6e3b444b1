#!/usr/bin/env bash
# Builds the containerd that `ERDMA_CONTAINERD=cdi scripts/cluster.sh up` runs instead of Debian's
# 1.6 (which has no CDI), from the Go module pinned in containerd/go.mod and containerd/go.sum,
# into a cache outside the repository:
#   ${ERDMA_CONTAINERD_CACHE:-/var/cache/erdma-controller}/containerd-<release>-<hash>/bin
# with containerd, containerd-shim-runc-v2 and ctr. runc and the CNI plugins stay Debian's.
# <hash> covers go.mod, go.sum, the build flags and the Go version, so a change to any of them
# builds a new directory; go-build-lib.sh (shared with build-k8s.sh and test/helm/build-helm.sh)
# says how the directory is made and reused. The last line on stdout is the bin directory;
# progress goes to stderr.
#
#   test/cluster/build-containerd.sh            build if needed, print the bin directory
#   test/cluster/build-containerd.sh --print    print the bin directory it would use, build nothing
#
# Needs Go >= 1.26.6 (containerd v2.4's go.mod asks for it; /usr/local/go/bin is added to PATH)
# and the Go module proxy, or a module cache that already holds the modules. Times on 2 cores:
# test/cluster/README.md.
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=go-build-lib.sh
. "$HERE/go-build-lib.sh"
GB_LOG=build-containerd

# The release: keep in step with containerd/go.mod (the github.com/containerd/containerd/v2 line).
CONTAINERD_VERSION=v2.4.2

log() { gb_log "$@"; }
die() { gb_die "$@"; }

grep -q "github.com/containerd/containerd/v2 $CONTAINERD_VERSION" "$HERE/containerd/go.mod" ||
  die "containerd/go.mod does not pin github.com/containerd/containerd/v2 $CONTAINERD_VERSION"

# As upstream's Makefile builds a release (no debug info, the version stamped; the shim without
# the gRPC server, tag no_grpc), but with CGO_ENABLED=0: static binaries, nothing of this machine's
# C libraries. The commit is not known from the module, so Revision stays empty. Snapshotters that
# need what this machine lacks or that nothing here uses are left out (upstream's own build tags):
# no_btrfs (cgo and the btrfs headers), no_devmapper, no_zfs; overlayfs and native stay.
pkg=github.com/containerd/containerd/v2
ldflags="-s -w -X $pkg/version.Version=$CONTAINERD_VERSION -X $pkg/version.Revision= -X $pkg/version.Package=$pkg"
tags="urfave_cli_no_docs no_btrfs no_devmapper no_zfs"
shim_tags="$tags no_grpc"

GB_NAME=containerd GB_VERSION=$CONTAINERD_VERSION
GB_CACHE=${ERDMA_CONTAINERD_CACHE:-/var/cache/erdma-controller}
GB_FILES=("$HERE/containerd/go.mod" "$HERE/containerd/go.sum")
GB_KEY="$ldflags | $tags | $shim_tags | containerd ctr containerd-shim-runc-v2"
GB_OUT=bin GB_DONE=bin/containerd
gb_build() {
  local tmp=$1 t0=$SECONDS t1 got
  mkdir "$tmp/bin"
  log "building containerd $CONTAINERD_VERSION (containerd, ctr, containerd-shim-runc-v2) with $(go env GOVERSION); a cold build takes about 3 min on 2 cores"
  (cd "$HERE/containerd" && go build -trimpath -tags "$tags" -ldflags "$ldflags" -o "$tmp/bin/" \
    $pkg/cmd/containerd $pkg/cmd/ctr)
  t1=$SECONDS
  log "containerd and ctr built in $((t1 - t0)) s; building the shim"
  (cd "$HERE/containerd" && go build -trimpath -tags "$shim_tags" -ldflags "$ldflags" -o "$tmp/bin/" \
    $pkg/cmd/containerd-shim-runc-v2)
  log "containerd-shim-runc-v2 built in $((SECONDS - t1)) s"

  got=$("$tmp/bin/containerd" --version)
  case $got in "containerd $pkg $CONTAINERD_VERSION"*) ;; *) die "containerd --version says '$got', expected $CONTAINERD_VERSION" ;; esac
  got=$("$tmp/bin/ctr" --version)
  [ "$got" = "ctr $pkg $CONTAINERD_VERSION" ] || die "ctr --version says '$got', expected $CONTAINERD_VERSION"
  got=$("$tmp/bin/containerd-shim-runc-v2" -v)
  case $got in *"Version:  $CONTAINERD_VERSION"*) ;; *) die "containerd-shim-runc-v2 -v says '$got', expected $CONTAINERD_VERSION" ;; esac
}
go_build_cached "$@"
