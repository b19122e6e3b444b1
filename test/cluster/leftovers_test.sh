#!/usr/bin/env bash
# Checks test/cluster/leftovers.sh itself: a path the cluster tests must call "left behind" is
# reported, on a clean machine and on one where the directory already existed, and what is not
# left behind is not. Each case makes its paths under /var/lib (never a path a real cluster uses)
# and removes them. Root; run by ctest (label deploy, so never beside a cluster test).
set -euo pipefail
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
[ "$(id -u)" -eq 0 ] || { echo "leftovers_test: run as root" >&2; exit 1; }
STATE=/run/erdma-leftovers-test.$$   # never created: the state directory is gone after `down`
PORT=1                               # nothing listens there
SRC=$(cd "$HERE/../.." && pwd)
# shellcheck source=leftovers.sh
. "$HERE/leftovers.sh"

base=/var/lib/erdma-leftovers-test.$$
busy=$(mktemp -d "${TMPDIR:-/tmp}/erdma-leftovers-test.XXXXXX")
trap 'rm -rf "$base" "$busy"' EXIT
passed=0 failed=0
expect() {  # WHAT PATTERN TEXT: TEXT has a line matching PATTERN (grep -E)
  # shellcheck disable=SC2001  # sed indents every line of TEXT
  if grep -qE -- "$2" <<<"$3"; then passed=$((passed + 1)); echo "PASS: $1"
  else failed=$((failed + 1)); echo "FAIL: $1: no line matching '$2' in:"; sed 's/^/  /' <<<"$3"; fi
}
expect_not() {  # WHAT PATTERN TEXT: no line of TEXT matches PATTERN
  # shellcheck disable=SC2001  # sed indents every line of TEXT
  if grep -qE -- "$2" <<<"$3"; then failed=$((failed + 1)); echo "FAIL: $1: unexpected '$2' in:"; sed 's/^/  /' <<<"$3"
  else passed=$((passed + 1)); echo "PASS: $1"; fi
}

# A clean machine: a named path that did not exist is created (as the controller-manager once made
# /usr/libexec/kubernetes), and a path no list names is born elsewhere.
leftover_host_paths=("$base/named")
mkdir -p "$base/existing"
leftovers_before
mkdir -p "$base/named/kubelet-plugins/volume/exec" "$base/unnamed"
echo x > "$base/unnamed/file"
echo x > "$busy/lane-file"
out=$(leftovers_after)
expect "a named path that was absent and is now there" "^created: $base/named " "$out"
expect "a new path no list names" "^new path: $base/unnamed/file$" "$out"
expect "the new path's new directories too" "^new path: $base/named/kubelet-plugins/volume/exec$" "$out"
expect_not "a directory that only gained entries is not new" "^new path: $base/existing$|^new path: /var/lib$" "$out"
expect_not "a file in a busy path (the sanitizer lane's temporary files)" "lane-file" "$out"
rm -rf "$base/named" "$base/unnamed"

# A used machine: the directories were there before; a leak inside them still shows.
mkdir -p "$base/named/kubelet-plugins/volume/exec"
leftover_host_paths=("$base/named" "$base/existing")
leftovers_before
mkdir "$base/named/kubelet-plugins/volume/exec/flexvolume"
out=$(leftovers_after)
expect "a named path that existed gained an entry" "^changed: $base/named$" "$out"
expect "the entry is a new path" "^new path: $base/named/kubelet-plugins/volume/exec/flexvolume$" "$out"
expect_not "a named path that is unchanged" "$base/existing" "$out"

# Created and removed again within the run: nothing is left, nothing is reported.
leftover_host_paths=("$base/named")
leftovers_before
mkdir "$base/transient" && rmdir "$base/transient"
out=$(leftovers_after)
expect_not "a path made and removed before the check" "$base" "$out"

# A caller that did not set PORT (dra.sh once): an error with the reason, never an empty report
# that reads as "nothing left".
rc=0
out=$( (unset PORT; leftovers_after) 2>&1) || rc=$?
expect "without PORT, leftovers_after says so" "the caller sets PORT" "$out"
expect "and exits non-zero (status $rc)" "^[1-9]" "$rc"

echo "leftovers_test: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
