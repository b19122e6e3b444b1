#!/bin/sh
# A VM worker node of scripts/cluster.sh (`up --vm-nodes N`): PID 1 in the guest after the
# initramfs (test/vm/init.sh) has switched to this machine's root, read-only over 9p. Starts what
# a node runs, as a node image would: the network (eth0 on the cluster's node bridge, Soft-RoCE
# rxe0 on it as the node's RDMA card, routes to the other nodes' pods), containerd, the kubelet
# and kube-proxy of the cluster's pinned release, with configuration cluster.sh wrote into the node
# directory (9p tag "node", mounted on /mnt). Logs go there too (logs/), so `scripts/cluster.sh`
# and the tests read them from the host. Images dropped into the node directory's import/ are
# imported into containerd (how `scripts/cluster.sh import` reaches this node).
# POSIX sh: the host's /bin/sh runs it. Never returns: PID 1 ends with the reaper below.
PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
export PATH
N=/mnt
mount -t 9p -o trans=virtio,version=9p2000.L,msize=512000 node "$N" || { echo "guest: cannot mount the node directory"; sleep 5; echo o > /proc/sysrq-trigger; }
. "$N/node.env"   # NAME IP GATEWAY PREFIX POD_CIDR ROUTES BIN CONTAINERD_BIN CTR SRC
L=$N/logs
mkdir -p "$L"
uptime_s() { cut -d' ' -f1 /proc/uptime; }
log() { echo "[$(uptime_s)] $*" >> "$L/guest.log"; }
log "$NAME: kernel $(uname -r), stage 2 at uptime $(uptime_s) s"

# Writable places on the read-only root: tmpfs, as a node image's /var and /run would be disks.
for d in /run /var/lib /var/log /var/tmp /root; do mount -t tmpfs -o mode=755 tmpfs "$d"; done
mkdir -p /run/netns /run/tmp /dev/shm /dev/pts /var/lib/kubelet /var/log/pods /run/cni/net.d /run/cni/bin
TMPDIR=/run/tmp
export TMPDIR
mount -t tmpfs tmpfs /dev/shm
mount -t devpts -o newinstance,ptmxmode=0666 devpts /dev/pts
mount -t cgroup2 cgroup2 /sys/fs/cgroup
# The kubelet and runc use these controllers: enable them for the children of the root.
for c in $(cat /sys/fs/cgroup/cgroup.controllers); do echo "+$c" > /sys/fs/cgroup/cgroup.subtree_control 2>/dev/null; done
# A node's mounts are shared (systemd does that): the kubelet's volume propagation and the
# agent's HostToContainer view of /var/run/netns need it.
mount --bind /var/lib/kubelet /var/lib/kubelet
mount --make-rshared /
hostname "$NAME"
for kv in net/ipv4/ip_forward=1 net/bridge/bridge-nf-call-iptables=1 net/bridge/bridge-nf-call-ip6tables=1 \
          vm/overcommit_memory=1 kernel/panic=10 kernel/panic_on_oops=1; do
  echo "${kv#*=}" > "/proc/sys/${kv%=*}" 2>/dev/null || log "sysctl ${kv%=*} not set"
done

# The network: eth0 on the node bridge, the default route to the cluster's gateway (the host
# node's network namespace, where the API server listens), the other nodes' pod ranges.
ip link set lo up
ip link set eth0 up
ip addr add "$IP/$PREFIX" dev eth0
ip route add default via "$GATEWAY"
for r in $ROUTES; do ip route add "${r%@*}" via "${r#*@}"; done
# The node's RDMA card: Soft-RoCE on eth0 (an ECS instance's eRDMA interface, in this test).
rdma link add rxe0 type rxe netdev eth0 >> "$L/guest.log" 2>&1 || log "rdma link add rxe0 failed"
log "network up: $(ip -br addr show eth0 | tr -s ' '); rdma: $(rdma link show 2>&1 | tr '\n' ';')"

# CNI: the plugins Debian ships and the test cluster's chain step, in one directory.
for p in /usr/lib/cni/*; do ln -s "$p" "/run/cni/bin/${p##*/}"; done
ln -s "$SRC/test/cluster/vm-node/erdma-rxe" /run/cni/bin/erdma-rxe
cp "$N/cni.conflist" /run/cni/net.d/10-erdma-cluster.conflist

run() {  # NAME CMD...: in the background, output in logs/NAME.log, pid in /run/NAME.pid
  name=$1
  shift
  "$@" >> "$L/$name.log" 2>&1 < /dev/null &
  echo $! > "/run/$name.pid"
}
run containerd "$CONTAINERD_BIN/containerd" --config "$N/containerd.toml"
i=0
until "$CTR" --address /run/containerd/containerd.sock --timeout 5s version > /dev/null 2>&1; do
  i=$((i + 1))
  [ $i -lt 300 ] && kill -0 "$(cat /run/containerd.pid)" 2>/dev/null || { log "containerd did not start"; break; }
  sleep 0.3
done
log "containerd answers"
import_one() {  # FILE: into containerd's k8s.io namespace; FILE.done or FILE.failed says how it went
  if "$CTR" --address /run/containerd/containerd.sock -n k8s.io images import "$1" > "$1.out" 2>&1; then
    mv "$1.out" "$1.done"
  else
    mv "$1.out" "$1.failed"
  fi
}
# At every boot (containerd's store is a tmpfs): the images cluster.sh put here, and what
# `import` brought before a reboot.
rm -f "$N"/images/*.done "$N"/images/*.failed "$N"/import/*.done "$N"/import/*.failed
for f in "$N"/images/*.tar "$N"/import/*.tar; do [ -e "$f" ] && import_one "$f"; done
log "images imported: $(ls "$N"/images/*.done "$N"/import/*.done 2>/dev/null | wc -l), failed: $(ls "$N"/images/*.failed "$N"/import/*.failed 2>/dev/null | tr '\n' ' ')"

run kubelet "$BIN/kubelet" --config="$N/kubelet.yaml" --kubeconfig="$N/kubelet.kubeconfig" \
  --hostname-override="$NAME" --node-ip="$IP" --node-labels="$LABELS" --v=2
run kube-proxy "$BIN/kube-proxy" --config="$N/kube-proxy.yaml"
log "kubelet and kube-proxy started"

# `scripts/cluster.sh import` drops archives into import/ and waits for FILE.done or FILE.failed.
(while :; do
  for f in "$N"/import/*.tar; do
    [ -e "$f" ] && [ ! -e "$f.done" ] && [ ! -e "$f.failed" ] && import_one "$f"
  done
  sleep 1
done) &

# PID 1 reaps every orphan (shims, runc, exec sessions) for as long as the node runs.
exec /usr/bin/python3 -c '
import os, time
while True:
    try:
        os.wait()
    except ChildProcessError:
        time.sleep(1)
'
