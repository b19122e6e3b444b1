# shellcheck shell=bash
# Sourced by cluster_test_begin (test/cluster/checks.sh), so by every real-cluster test: what
# scripts/cluster.sh may leave on this machine, noted before `up` and checked after `down`. The
# callers set STATE (the state directory) and PORT (the API server's port here).
#
# Two checks that do not depend on what the machine had before:
# - every path a kubelet, containerd, a CNI plugin or the controller-manager creates by default on
#   a host is named below, and each must be absent after `down`, or, when it was there before,
#   hold exactly the same entries with the same change times;
# - a scan of this machine's root filesystem for any path born after `leftovers_before` (birth
#   time, so a directory whose entries merely changed is not counted), outside the places other
#   stages of the test command write to at the same time: the build and cache directories listed
#   in leftover_busy_paths. So a new path anywhere is found, named or not.

# The paths a kubelet, containerd, CNI or the controller-manager would create on a host by default.
leftover_host_paths=(/var/lib/kubelet /var/log/pods /var/log/containers /var/lib/cni /var/lib/containerd
  /run/containerd /run/netns /run/cni /usr/libexec/kubernetes /etc/cni /etc/containerd /etc/kubernetes
  /dev/infiniband /etc/cdi /run/cdi /var/run/cdi /opt/cni)

# Written by the test command's other stages while a cluster test runs (the sanitizer lane builds
# and runs its suites beside it), or caches by design: not the cluster's doing. ~/.config/go is the
# Go toolchain's own state: every `go` run counts itself in telemetry/, a file per day, so a run
# that crosses midnight (UTC) sees a new one born.
leftover_busy_paths=(/proc /sys /dev /tmp /var/tmp /var/cache/erdma-controller /var/cache/apt /var/lib/apt
  /var/log "${HOME:-/root}/.cache" "${HOME:-/root}/go" "${HOME:-/root}/.config/go"
  "${CCACHE_DIR:-${HOME:-/root}/.ccache}")

# _leftover_signature PATH: one line per entry under PATH (name, type, change time), or "absent".
_leftover_signature() {
  if [ -e "$1" ] || [ -L "$1" ]; then
    find "$1" -xdev -printf '%p %y %C@\n' 2>/dev/null | sort
  else
    echo absent
  fi
}
_leftover_iptables() { iptables-save 2>/dev/null | grep -v '^#' | sed 's/\[[0-9]*:[0-9]*\]//' || true; }

# _leftover_new_paths: paths on the root filesystem born after leftovers_before, outside the busy paths,
# the state directory and the repository the test runs from.
_leftover_new_paths() {
  local prune=() p
  for p in "${leftover_busy_paths[@]}" "$STATE" "${SRC:-}"; do
    [ -n "$p" ] && prune+=(-path "${p%/}" -o)
  done
  # ctime is never older than the birth time: a path born after the mark has a newer ctime, so
  # -newerct keeps the candidates few, and the birth time decides.
  find / -xdev \( "${prune[@]}" -false \) -prune -o -newerct "@$leftover_since" -print0 2>/dev/null |
    xargs -0 -r stat -c '%W %n' 2>/dev/null | awk -v t="$leftover_since" '$1 > t {sub(/^[0-9]+ /, ""); print}' | sort
}

# leftovers_before: notes the named paths, iptables rules and network namespaces there are now, and
# the time after which a new path counts as left behind.
leftovers_before() {
  local p probe born
  # Birth times are what the scan reads: a filesystem without them would hide every new path.
  probe=$(mktemp /var/lib/.erdma-leftovers.XXXXXX)
  born=$(stat -c %W "$probe" 2>/dev/null || echo 0)
  rm -f "$probe"
  [ "$born" != 0 ] || {
    echo "leftovers.sh: the root filesystem keeps no birth times (stat %W is 0); new paths cannot be found" >&2
    return 1
  }
  declare -gA leftover_before_sig=()
  for p in "${leftover_host_paths[@]}"; do leftover_before_sig[$p]=$(_leftover_signature "$p"); done
  leftover_before_iptables=$(_leftover_iptables)
  leftover_before_netns=$(ip netns list 2>/dev/null || true)
  # Birth times are whole seconds here: a path counts when born in a later second than this one,
  # and the second ends before `up` starts.
  leftover_since=$(date +%s)
  sleep 1
}

# leftovers_after: prints one line per thing left behind since leftovers_before (nothing: all
# clean): a process naming the state directory, a mount under it, the directory itself, the
# kubelet's cgroups, a network namespace, a listener on the port, a named path created or changed,
# a new path anywhere on the root filesystem, changed iptables rules.
leftovers_after() {
  local pid d p sig
  # A caller without them would get an error in place of a report: an empty answer that reads as
  # "nothing left". The callers check the status.
  : "${STATE:?leftovers_after: the caller sets STATE}" "${PORT:?leftovers_after: the caller sets PORT}"
  # shellcheck disable=SC2010  # the PID entries of /proc are plain digits
  for pid in $(ls /proc | grep -E '^[0-9]+$'); do
    # shellcheck disable=SC2015  # skip this shell and its subshell
    [ "$pid" != $$ ] && [ "$pid" != "$BASHPID" ] || continue
    # An argument that is the directory or a path in it (not /run/erdma-cluster.lock, say).
    tr '\0' '\n' 2>/dev/null < "/proc/$pid/cmdline" |
      awk -v s="$STATE" 'index($0, s "/") || substr($0, length($0) - length(s) + 1) == s {f = 1} END {exit !f}' &&
      echo "process $pid: $(tr '\0' ' ' < "/proc/$pid/cmdline" 2>/dev/null)"
  done
  grep -q -- "$STATE" /proc/self/mountinfo && echo "mounts under $STATE"
  [ ! -e "$STATE" ] || echo "$STATE"
  for d in /sys/fs/cgroup/*/erdma-cluster /sys/fs/cgroup/*/kubepods*; do [ ! -e "$d" ] || echo "cgroup $d"; done
  [ "$(ip netns list 2>/dev/null || true)" = "$leftover_before_netns" ] || echo "network namespaces: $(ip netns list)"
  ss -ltnH "sport = :$PORT" | grep -q . && echo "a listener on port $PORT"
  for p in "${leftover_host_paths[@]}"; do
    sig=$(_leftover_signature "$p")
    [ "$sig" = "${leftover_before_sig[$p]}" ] && continue
    if [ "${leftover_before_sig[$p]}" = absent ]; then
      echo "created: $p ($(echo "$sig" | wc -l) entries: $(echo "$sig" | cut -d' ' -f1 | head -n 5 | tr '\n' ' '))"
    else
      echo "changed: $p"
    fi
  done
  _leftover_new_paths | sed 's/^/new path: /'
  [ "$(_leftover_iptables)" = "$leftover_before_iptables" ] || echo "this machine's iptables rules changed"
  return 0
}
