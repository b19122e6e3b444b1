# shellcheck shell=bash
# The one library of the real-cluster tests (smoke.sh, journey.sh, admission-policy.sh, cdi.sh,
# dra.sh, upgrade.sh, vm-nodes.sh) and the cluster benches: the shared start and end
# (cluster_test_begin, cluster_test_end; cluster_session for the benches), checks that print PASS
# or FAIL with their evidence and count them (check, must), one wait (wait_for), bounded steps
# (bounded) and the skip rule (skip_or_fail). The caller sets CHECKS_NAME (a name for messages)
# and, for cluster_test_begin, SRC, CLUSTER and STATE.

# running_under_ci: whether this run is CI's (CI=true, which .ci/run sets). Every shell skip asks
# this; C++ asks running_under_ci in test/skip.hpp, Python in test/webhook/server/integration/harness.py.
running_under_ci() { [ "${CI:-}" = true ]; }

# skip_or_fail WHY: a machine that cannot run the test: skipped (exit 0) with the reason, but
# under CI=true a failure, since the install step provides what the test needs (and CI runs as root).
skip_or_fail() {
  if running_under_ci; then
    echo "${CHECKS_NAME:-test}: FAILED: $* (the install step provides what this needs)" >&2
    exit 1
  fi
  echo "${CHECKS_NAME:-test}: skipped: $*" >&2
  exit 0
}

# check NAME CMD...: runs CMD; PASS or FAIL with its output (the evidence either way). CMD runs in
# a subshell of this shell (it sees the caller's functions and variables) with pipefail off: a
# pipeline's verdict is its last command's, so a `grep -q` or `grep -m1` that stops reading early
# never fails a check through the SIGPIPE of a `tee` or a `kubectl logs` before it.
check() {
  local name=$1
  shift
  local out rc=0
  out=$(set +o pipefail; "$@" 2>&1) || rc=$?
  if [ $rc -eq 0 ]; then
    passed=$((passed + 1))
    echo "PASS $name"
    [ -z "$out" ] || printf '%s\n' "$out" | head -n 8 | sed 's/^/     /'
  else
    failed=$((failed + 1))
    echo "FAIL $name (exit $rc)"
    printf '%s\n' "$out" | tail -n 30 | sed 's/^/     /'
  fi
  return $rc
}
# shellcheck disable=SC2154  # the caller sets t_start
phase() { echo "== $* ($((SECONDS - t_start)) s)"; }
# must NAME CMD...: a check the rest depends on; on failure the run ends here, counted (the EXIT
# trap of cluster_test_begin prints the counts).
must() {
  check "$@" && return 0
  echo "${CHECKS_NAME:-test}: stopping: the checks after this one need it"
  exit 1
}

# wait_for SECONDS CMD...: CMD until it succeeds, at most SECONDS; its last output on failure.
wait_for() {
  local secs=$1
  shift
  local end=$((SECONDS + secs)) out
  while :; do
    out=$("$@" 2>&1) && { [ -z "$out" ] || printf '%s\n' "$out"; return 0; }
    [ $SECONDS -lt $end ] || { printf 'gave up after %s s; last answer:\n%s\n' "$secs" "$out"; return 1; }
    sleep 0.5
  done
}

# bounded SECONDS WHAT CMD...: CMD, killed after SECONDS (then TERM's grace of 5 s); when it was
# killed, says which step never finished and returns 124, so no step of a cluster test waits
# without end on an API server, a kubelet or a process that does not answer.
bounded() {
  local secs=$1 what=$2 rc=0
  shift 2
  timeout -k 5 "$secs" "$@" || rc=$?
  [ $rc -ne 124 ] && [ $rc -ne 137 ] || echo "${CHECKS_NAME:-test}: $what did not finish in $secs s" >&2
  return $rc
}

# cluster_test_begin TOOL...: the start every real-cluster test shares. Checks that it runs as root
# and that each TOOL is there (skip_or_fail: a skip outside CI, a failure under CI=true; go may
# also be /usr/local/go/bin/go, where test/cluster/go-build-lib.sh finds it), refuses to run while
# a cluster is up, notes what the machine has for the leftover check (leftovers.sh), makes the
# scratch directory $work, zeroes the counters and sets the EXIT trap. From then on the run ends
# the same way whatever ends it: the caller's before_down (if defined: stop what the test started
# in the background), the caller's on_failure (if defined, and only when a check failed: what to
# print about the cluster before it goes), `scripts/cluster.sh down`, $work removed, and
# "NAME: N passed, M failed". A caller that sets keep_on_failure=1 keeps a failed run's cluster up.
cluster_test_begin() {
  local tool
  # shellcheck disable=SC2034  # t_start is read by phase; passed and failed by check and the end
  t_start=$SECONDS passed=0 failed=0
  [ "$(id -u)" -eq 0 ] || skip_or_fail "needs root"
  for tool in "$@"; do
    command -v "$tool" >/dev/null 2>&1 || { [ "$tool" = go ] && [ -x /usr/local/go/bin/go ]; } ||
      skip_or_fail "$tool is missing (scripts/install-deps.sh installs it)"
  done
  PORT=${ERDMA_CLUSTER_PORT:-6443}  # the API server's, for the leftover check
  # shellcheck source=test/cluster/leftovers.sh
  . "$SRC/test/cluster/leftovers.sh"
  cluster_session "$CHECKS_NAME"
  leftovers_before || exit 1
  trap _cluster_test_stopped EXIT
}

# cluster_session NAME: the part of that start the benches share (bench/*.sh): refuses to run while
# a cluster is up, makes the scratch directory $work, and sets an EXIT trap that runs the caller's
# before_down (if defined), brings the cluster down and removes $work. The caller sets CLUSTER and
# STATE.
cluster_session() {
  if "$CLUSTER" status >/dev/null 2>&1; then
    echo "$1: a cluster is already up at $STATE; run scripts/cluster.sh down first" >&2
    exit 1
  fi
  work=$(mktemp -d "${TMPDIR:-/tmp}/erdma-$1.XXXXXX")
  trap _cluster_session_end EXIT
}
_cluster_session_end() {
  local rc=$?
  if declare -F before_down >/dev/null; then before_down || true; fi
  "$CLUSTER" down >/dev/null 2>&1 || "$CLUSTER" down
  rm -rf "$work"
  exit "$rc"
}

# _cluster_test_teardown: before_down, on_failure when a check failed, `down`, $work removed.
# Returns 1, and brings nothing down, when keep_on_failure=1 and a check failed.
_cluster_test_teardown() {
  if declare -F before_down >/dev/null; then before_down || true; fi
  if [ "$failed" -gt 0 ] && [ -n "${KUBECONFIG:-}" ] && declare -F on_failure >/dev/null; then
    echo "---- $CHECKS_NAME: on failure, the cluster as it is" >&2
    on_failure >&2 2>&1 || true
  fi
  if [ "${keep_on_failure:-}" = 1 ] && [ "$failed" -gt 0 ]; then
    echo "$CHECKS_NAME: the cluster stays up for a look (scripts/cluster.sh down ends it); files in $work" >&2
    return 1
  fi
  "$CLUSTER" down >/dev/null 2>&1 || "$CLUSTER" down
  rm -rf "$work"
}

# The EXIT trap until cluster_test_end: a `must` that failed, a step that could not go on, or a
# signal ended the run early.
_cluster_test_stopped() {
  local rc=$?
  [ "$rc" -ne 0 ] || rc=1  # only cluster_test_end ends a run well
  [ "$failed" -gt 0 ] || failed=1
  _cluster_test_teardown || true
  echo "$CHECKS_NAME: $passed passed, $failed failed in $((SECONDS - t_start)) s (stopped early)"
  exit "$rc"
}

# cluster_test_end: the end of a run that got through: the "down" phase (as the trap above), then a
# check that nothing is left on this machine (leftovers.sh), and "NAME: N passed, M failed in S s".
# Returns 0 when every check passed, else 1: the last line of each test, whose exit status it is.
cluster_test_end() {
  local left
  phase "down"
  trap - EXIT
  _cluster_test_teardown || return 1
  left=$(leftovers_after) || left="the leftover check itself failed (exit $?): $left"
  check "nothing left behind" test -z "$left" || printf '%s\n' "$left"
  echo "$CHECKS_NAME: $passed passed, $failed failed in $((SECONDS - t_start)) s"
  [ "$failed" -eq 0 ]
}
