# shellcheck shell=bash
# Sourced by the scripts that build test tools from pinned sources into a cache outside the
# repository: from Go modules test/cluster/build-k8s.sh, test/cluster/build-containerd.sh and
# test/helm/build-helm.sh; from Debian's kernel source test/vm/build-kernel.sh.
# The one copy of what they share: the cache directory named by a hash of its inputs, reuse, a
# lock, the build in a temporary directory renamed into place, durations.
#
# The caller sets, then calls `go_build_cached "$@"`:
#   GB_LOG     prefix of progress lines (stderr), e.g. build-k8s
#   GB_NAME    short name in the directory's name, e.g. k8s
#   GB_VERSION the release, also in the directory's name
#   GB_CACHE   the cache directory (e.g. ${ERDMA_K8S_CACHE:-/var/cache/erdma-controller})
#   GB_FILES   array: the go.mod and go.sum files the build reads
#   GB_KEY     everything else the result depends on (tags, ldflags, the list of commands)
#   GB_OUT     what to print, relative to the directory (bin, or a binary's name)
#   GB_DONE    a file, relative to the directory, that every complete build has
#   gb_build   a function: gb_build TMP builds into the directory TMP (relative paths as in
#              GB_OUT), checks the result, prints its duration; the current directory is unchanged
#   GB_INFO    (optional) the first line of TMP/BUILDINFO
#   GB_TOOLCHAIN (optional) what builds it, for a build that is not Go's (e.g. "gcc 12.2.0");
#              unset, the installed Go's version
# The directory is $GB_CACHE/$GB_NAME-$GB_VERSION-<hash>, <hash> covering GB_FILES' contents,
# GB_KEY and the toolchain, so a change to any of them builds a new directory. It appears
# complete or not at all (built in a temporary directory, then renamed), so an interrupted build is
# never reused; a second run finds it and returns at once. One build per GB_NAME at a time (a file
# lock): a second caller waits for the first and then reuses its result. The last line on stdout
# is $dir/$GB_OUT; with --print, that line is printed and nothing is built.
#
# Go builds (no GB_TOOLCHAIN) run with CGO_ENABLED=0 GOFLAGS=-mod=readonly GOTOOLCHAIN=local: static binaries,
# go.sum as the record of every module, and the installed Go (/usr/local/go/bin, >= 1.26) only.
# Go's own caches (go env GOMODCACHE, GOCACHE) are used as they are.

export PATH=/usr/local/go/bin:$PATH

gb_log() { echo "$GB_LOG: $*" >&2; }
gb_die() { gb_log "$*"; exit 1; }

go_build_cached() {
  local hash dir toolchain=${GB_TOOLCHAIN:-}
  if [ -z "$toolchain" ]; then
    command -v go >/dev/null || gb_die "go not found (expected /usr/local/go/bin/go, Go >= 1.26)"
    toolchain=$(go env GOVERSION)
  fi
  hash=$( { cat "${GB_FILES[@]}"; echo "$GB_KEY"; echo "$toolchain"; } | sha256sum | cut -c1-12)
  dir=$GB_CACHE/$GB_NAME-$GB_VERSION-$hash
  if [ "${1:-}" = "--print" ]; then
    echo "$dir/$GB_OUT"
    return 0
  fi
  if [ -e "$dir/$GB_DONE" ]; then
    gb_log "reusing $dir"
    echo "$dir/$GB_OUT"
    return 0
  fi
  mkdir -p "$GB_CACHE"
  exec 9>"$GB_CACHE/.build-$GB_NAME.lock"
  flock 9
  if [ -e "$dir/$GB_DONE" ]; then
    gb_log "reusing $dir (built by another run meanwhile)"
    echo "$dir/$GB_OUT"
    exec 9>&-
    return 0
  fi
  rm -rf "$GB_CACHE/.tmp-$GB_NAME-"* # what an interrupted build left (the lock says none is running)
  GB_TMP=$(mktemp -d "$GB_CACHE/.tmp-$GB_NAME-$GB_VERSION-$hash.XXXXXX")
  trap 'rm -rf "$GB_TMP"' EXIT
  [ -n "${GB_TOOLCHAIN:-}" ] || export CGO_ENABLED=0 GOFLAGS=-mod=readonly GOTOOLCHAIN=local
  local t0=$SECONDS
  gb_build "$GB_TMP"
  [ -e "$GB_TMP/$GB_DONE" ] || gb_die "the build left no $GB_DONE"
  { echo "${GB_INFO:-$GB_NAME $GB_VERSION} $toolchain"
    echo "built $(date -u +%Y-%m-%dT%H:%M:%SZ) in $((SECONDS - t0)) s"; } > "$GB_TMP/BUILDINFO"
  chmod 755 "$GB_TMP"
  mv -T "$GB_TMP" "$dir"
  trap - EXIT
  exec 9>&-
  gb_log "built in $((SECONDS - t0)) s: $(du -sh "$dir/$GB_OUT" | cut -f1) in $dir"
  echo "$dir/$GB_OUT"
}
