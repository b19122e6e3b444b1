# Sourced by test/cluster/smoke.sh and test/cluster/cdi.sh: what scripts/cluster.sh may leave on this
# machine, noted before `up` and compared after `down`. The callers set STATE (the state directory)
# and PORT (the API server's port here).

# The paths a kubelet or containerd would create on a host: none of them may appear.
leftover_host_paths=(/var/lib/kubelet /var/log/pods /var/log/containers /var/lib/cni /run/containerd /run/netns
  /usr/libexec/kubernetes /etc/cni /dev/infiniband /etc/cdi /run/cdi)

_leftover_paths() { for p in "${leftover_host_paths[@]}"; do [ -e "$p" ] && echo "$p"; done || true; }
_leftover_iptables() { iptables-save 2>/dev/null | grep -v '^#' | sed 's/\[[0-9]*:[0-9]*\]//' || true; }

# leftovers_before: notes the paths, iptables rules and network namespaces there are now.
leftovers_before() {
  leftover_before_paths=$(_leftover_paths)
  leftover_before_iptables=$(_leftover_iptables)
  leftover_before_netns=$(ip netns list 2>/dev/null || true)
}

# leftovers_after: prints one line per thing left behind since leftovers_before (nothing: all
# clean): a process naming the state directory, a mount under it, the directory itself, the
# kubelet's cgroups, a network namespace, a listener on the port, a new path, changed iptables rules.
leftovers_after() {
  local pid d
  for pid in $(ls /proc | grep -E '^[0-9]+$'); do
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
  local after
  after=$(_leftover_paths)
  [ "$after" = "$leftover_before_paths" ] || echo "paths: before '$leftover_before_paths', after '$after'"
  [ "$(_leftover_iptables)" = "$leftover_before_iptables" ] || echo "this machine's iptables rules changed"
  return 0
}

# down_and_check T0: brings the cluster down ("$CLUSTER" down; sets downed=1 for the caller's
# trap), then fails (the caller's `fail`) on anything left behind; `step` reports each part, the
# last with the whole test's time since T0.
down_and_check() {
  local t=$SECONDS left
  "$CLUSTER" down
  downed=1
  step "down in $((SECONDS - t)) s"
  left=$(leftovers_after)
  [ -z "$left" ] || fail "left behind: $left"
  step "nothing left behind; all checks passed in $((SECONDS - $1)) s"
}
