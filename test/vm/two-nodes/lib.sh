# Helpers for node.sh (sourced; POSIX sh as the guest's /bin/sh runs it). Needs ME, PEER,
# SHARED, W set. Clocks are /proc/uptime: under TCG a "sleep" loop drifts far behind.
now() { cut -d' ' -f1 /proc/uptime; }
since() { awk -v t0="$1" '{printf "%.1f", $1 - t0}' /proc/uptime; }
log() { echo "[$(now)] $*"; }
pass() { passed=$((passed + 1)); log "PASS: $*"; }
fail() { failed=$((failed + 1)); log "FAIL: $*"; }
check() {  # DESCRIPTION CMD...: PASS when CMD succeeds
  desc=$1
  shift
  if "$@"; then pass "$desc"; else fail "$desc"; return 1; fi
}
result() { echo "node$ME $*" >> "$VMOUT/results.txt"; }  # a line for the host's summary block
pctl() {  # P FILE: the P-th percentile (nearest rank) of the numbers in FILE (awk: python costs seconds under TCG)
  sort -n "$2" | awk -v p="$1" 'NF {v[n++] = $1} END {if (n) {r = int((p * n + 99) / 100); print v[(r < 1 ? 1 : r) - 1]}}'
}
# run NAME SECONDS CMD...: CMD bounded, output in $W/NAME.out and shown indented in the log.
run() {
  name=$1
  secs=$2
  shift 2
  t_run=$(now)
  timeout -s KILL "$secs" "$@" > "$W/$name.out" 2>&1
  rc=$?
  sed "s/^/    $name| /" "$W/$name.out" | head -${RUN_LINES:-40}
  [ "$rc" = 0 ] || log "    $name: exit $rc after $(since "$t_run") s"
  return $rc
}
quiet() {  # NAME SECONDS CMD...: as run, output only in the file
  name=$1
  secs=$2
  shift 2
  timeout -s KILL "$secs" "$@" > "$W/$name.out" 2>&1
}
wait_until() {  # SECONDS CMD...: polls CMD every 0.3 s on the uptime clock
  wu_end=$(($(cut -d. -f1 /proc/uptime) + $1))
  shift
  while ! "$@" > /dev/null 2>&1; do
    [ "$(cut -d. -f1 /proc/uptime)" -ge "$wu_end" ] && return 1
    sleep 0.3
  done
}
# Barriers and values through the shared 9p directory: ME.NAME markers, the peer's PEER.NAME.
# A node that gives up writes ME.abort so the other stops waiting for it.
put() {  # NAME VALUE
  printf '%s\n' "$2" > "$SHARED/$ME.$1.tmp" && mv "$SHARED/$ME.$1.tmp" "$SHARED/$ME.$1"
}
peer_has() { [ -e "$SHARED/$PEER.$1" ] || [ -e "$SHARED/$PEER.abort" ]; }
get() {  # NAME SECONDS: prints the peer's value; fails when it does not come in time
  if ! wait_until "$2" peer_has "$1" || [ ! -e "$SHARED/$PEER.$1" ]; then
    log "no '$1' from node $PEER within $2 s$( [ -e "$SHARED/$PEER.abort" ] && echo " (node $PEER gave up)")"
    return 1
  fi
  cat "$SHARED/$PEER.$1"
}
barrier() {  # NAME [SECONDS]
  put "$1" "$(now)"
  get "$1" "${2:-180}" > /dev/null
}
