# shellcheck shell=sh
# Functions of a VM worker node (sourced, POSIX sh): by test/cluster/vm-node/guest.sh at boot, and
# by every command `scripts/cluster.sh exec --node` sends, which may call restart_containerd, kill_containerd,
# restart_kubelet and prepare_reboot. Needs node.env's variables (N, NAME, IP, LABELS, BIN, CONTAINERD_BIN, CTR) and
# L, the log directory.
uptime_s() { cut -d' ' -f1 /proc/uptime; }
log() { echo "[$(uptime_s)] $*" >> "$L/guest.log"; }

run() {  # NAME CMD...: in the background, output in logs/NAME.log, pid in /run/NAME.pid
  name=$1
  shift
  "$@" >> "$L/$name.log" 2>&1 < /dev/null &
  echo $! > "/run/$name.pid"
}

stop_one() {  # NAME: TERM, then wait until it is gone (at most 10 s), then KILL
  pid=$(cat "/run/$1.pid" 2>/dev/null) || return 0
  kill -TERM "$pid" 2>/dev/null
  j=0
  while kill -0 "$pid" 2>/dev/null && [ $j -lt 50 ]; do sleep 0.2; j=$((j + 1)); done
  kill -KILL "$pid" 2>/dev/null
  log "stopped $1"
}

start_containerd() {  # and wait until it answers (at most 90 s), or fail when it exits
  run containerd "$CONTAINERD_BIN/containerd" --config "$N/containerd.toml"
  i=0
  until "$CTR" --address /run/containerd/containerd.sock --timeout 5s version > /dev/null 2>&1; do
    i=$((i + 1))
    # shellcheck disable=SC2015  # give up when out of tries or when containerd has exited
    [ $i -lt 300 ] && kill -0 "$(cat /run/containerd.pid)" 2>/dev/null || { log "containerd did not start"; return 1; }
    sleep 0.3
  done
  log "containerd answers"
}

start_kubelet() {
  # shellcheck disable=SC2153  # NAME comes from node.env
  run kubelet "$BIN/kubelet" --config="$N/kubelet.yaml" --kubeconfig="$N/kubelet.kubeconfig" \
    --hostname-override="$NAME" --node-ip="$IP" --node-labels="$LABELS" --v=2
  log "kubelet started"
}

restart_containerd() { stop_one containerd && start_containerd; }
# containerd killed outright (no chance to clean up), then started again.
kill_containerd() {
  pid=$(cat /run/containerd.pid 2>/dev/null) || return 1
  kill -KILL "$pid" || return 1
  j=0
  while kill -0 "$pid" 2>/dev/null && [ $j -lt 50 ]; do sleep 0.2; j=$((j + 1)); done
  log "killed containerd (SIGKILL)"
  start_containerd
}
# What a node's shutdown does before the power goes: the services stop, the disk is synced.
prepare_reboot() {
  stop_one kubelet
  stop_one kube-proxy
  stop_one containerd
  sync
  log "services stopped, disk synced: ready for the power to go"
}
restart_kubelet() { stop_one kubelet && start_kubelet; }

import_one() {  # FILE: into containerd's k8s.io namespace; FILE.done or FILE.failed says how it went
  if "$CTR" --address /run/containerd/containerd.sock -n k8s.io images import "$1" > "$1.out" 2>&1; then
    mv "$1.out" "$1.done"
  else
    mv "$1.out" "$1.failed"
  fi
}
