# shellcheck shell=bash
# Sourced by the real-cluster tests (journey.sh, dra.sh): checks that print PASS or FAIL with
# their evidence and count them. The caller sets t_start=$SECONDS, passed=0, failed=0 and a
# name for messages in CHECKS_NAME.

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

# check NAME CMD...: runs CMD; PASS or FAIL with its output (the evidence either way).
check() {
  local name=$1
  shift
  local out rc=0
  out=$("$@" 2>&1) || rc=$?
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
# must NAME CMD...: a check the rest depends on; on failure the run ends here, counted.
must() {
  check "$@" && return 0
  echo "${CHECKS_NAME:-test}: stopping: the checks after this one need it"
  echo "$passed passed, $failed failed"
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
