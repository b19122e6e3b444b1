#!/usr/bin/env bash
# Builds an earlier release of this project from its commit in this repository's history, for the
# upgrade test (test/cluster/upgrade.sh): the release's source tree and the three files its images
# need (erdma-agent, libsmc-preload.so, erdma-webhook), into a cache outside the repository:
#   ${ERDMA_RELEASE_CACHE:-/var/cache/erdma-controller}/release-<version>-<hash>/
#     src/     the release's tree (manifests/, certs/, images/build-images.sh, ...)
#     build/   agent/erdma-agent, agent/preload/libsmc-preload.so, webhook/erdma-webhook and
#              generated/erdma/version.hpp, laid out as in a CMake build tree, so that the
#              release's own images/build-images.sh --build-dir build/ makes its images
# <hash> covers the commit and the compiler, so another pin builds another directory;
# go-build-lib.sh says how the directory is made and reused. The last line on stdout is the
# directory; progress goes to stderr.
#
#   test/cluster/build-release.sh COMMIT VERSION           build if needed, print the directory
#   test/cluster/build-release.sh COMMIT VERSION --print   print the directory, build nothing
#
# COMMIT must be in this repository's history (a shallow clone does not have it: git fetch
# --unshallow) and its CMakeLists.txt must say VERSION. Only the three targets are built, with the
# release's CMake, Ninja and ccache: about 3 minutes cold on 2 cores (160 s measured), nothing once cached.
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
SRC=$(cd "$HERE/../.." && pwd)
# shellcheck source=go-build-lib.sh
. "$HERE/go-build-lib.sh"
GB_LOG=build-release

[ $# -ge 2 ] || { echo "usage: test/cluster/build-release.sh COMMIT VERSION [--print]" >&2; exit 2; }
commit=$1 version=$2
shift 2

git -C "$SRC" cat-file -e "$commit^{commit}" 2>/dev/null ||
  gb_die "commit $commit is not in $SRC's history (a shallow clone? git fetch --unshallow)"
commit=$(git -C "$SRC" rev-parse "$commit^{commit}")
git -C "$SRC" show "$commit:CMakeLists.txt" | grep -q "^project(erdma-controller VERSION $version " ||
  gb_die "commit $commit's CMakeLists.txt is not version $version"

GB_NAME=release GB_VERSION=$version
GB_CACHE=${ERDMA_RELEASE_CACHE:-/var/cache/erdma-controller}
GB_FILES=(/dev/null)  # the inputs are the commit (in GB_KEY) and the compiler
GB_KEY="$commit erdma-agent smc-preload erdma-webhook"
GB_TOOLCHAIN="$(g++ --version | head -n 1); $(cmake --version | head -n 1)"
GB_INFO="erdma-controller $version at $commit"
GB_OUT="" GB_DONE=build/webhook/erdma-webhook
gb_build() {
  local tmp=$1 t0=$SECONDS f
  mkdir "$tmp/src" "$tmp/build"
  git -C "$SRC" archive "$commit" | tar -x -C "$tmp/src"
  gb_log "building erdma-controller $version ($commit): erdma-agent, smc-preload, erdma-webhook; about 3 min cold on 2 cores"
  # Configured and built beside the cache, then only the outputs are kept (the objects are
  # hundreds of megabytes, and ccache has them).
  local full=$tmp/full
  timeout 600 cmake -S "$tmp/src" -B "$full" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
  timeout 1800 cmake --build "$full" --parallel "${BUILD_JOBS:-$(nproc)}" \
    --target erdma-agent smc-preload erdma-webhook >/dev/null
  for f in agent/erdma-agent agent/preload/libsmc-preload.so webhook/erdma-webhook generated/erdma/version.hpp; do
    mkdir -p "$tmp/build/$(dirname "$f")"
    cp "$full/$f" "$tmp/build/$f"
  done
  rm -rf "$full"
  grep -q "kVersion = \"$version\"" "$tmp/build/generated/erdma/version.hpp" ||
    gb_die "the build says $(grep kVersion "$tmp/build/generated/erdma/version.hpp"), expected $version"
  gb_log "built in $((SECONDS - t0)) s"
}
go_build_cached "$@"
