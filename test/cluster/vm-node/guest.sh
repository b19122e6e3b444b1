#!/bin/sh
# A VM worker node of scripts/cluster.sh (`up --vm-nodes N`): PID 1 in the guest after the
# initramfs (test/vm/init.sh) has switched to this machine's root, read-only over 9p. Starts what
# a node runs, as a node image would: the network (eth0 on the cluster's node bridge, Soft-RoCE
# rxe0 on it as the node's RDMA card, routes to the other nodes' pods), containerd, the kubelet
# and kube-proxy of the cluster's pinned release, with configuration cluster.sh wrote into the node
# directory (9p tag "node", mounted on /mnt). Logs go there too (logs/), so `scripts/cluster.sh`
# and the tests read them from the host. Archives dropped into import/ are imported into
# containerd (`scripts/cluster.sh import`); scripts dropped into cmd/ are run, their output and exit
# status written beside them (`scripts/cluster.sh exec --node`). The functions are in guest-lib.sh.
# POSIX sh: the host's /bin/sh runs it. Never returns: PID 1 ends as the reaper below.
PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
export PATH
N=/mnt
mount -t 9p -o trans=virtio,version=9p2000.L,msize=512000 node "$N" || { echo "guest: cannot mount the node directory"; sleep 5; echo o > /proc/sysrq-trigger; }
# shellcheck disable=SC1091  # cluster.sh writes node.env for each node
. "$N/node.env"   # NAME IP GATEWAY PREFIX POD_CIDR ROUTES BIN CONTAINERD_BIN CTR SRC LABELS
L=$N/logs
mkdir -p "$L"
. "$SRC/test/cluster/vm-node/guest-lib.sh"
log "$NAME: kernel $(uname -r), stage 2 at uptime $(uptime_s) s"

# Writable places on the read-only root: /var/lib on the node's disk (it survives a reboot: the
# kubelet's state, containerd's store, the agent's host directory), the rest tmpfs as on a node.
if mount -t ext4 /dev/vda /var/lib; then
  log "/var/lib on the node's disk ($(df -h /var/lib | awk 'NR == 2 {print $3 " used of " $2}'))"
else
  log "no disk for /var/lib: a tmpfs, lost at reboot"
  mount -t tmpfs -o mode=755 tmpfs /var/lib
fi
for d in /run /var/log /var/tmp /root; do mount -t tmpfs -o mode=755 tmpfs "$d"; done
mkdir -p /run/netns /run/tmp /dev/shm /dev/pts /var/lib/kubelet /var/log/pods /run/cni/net.d /run/cni/bin
TMPDIR=/run/tmp
export TMPDIR
mount -t tmpfs tmpfs /dev/shm
mount -t devpts -o newinstance,ptmxmode=0666 devpts /dev/pts
mount -t cgroup2 cgroup2 /sys/fs/cgroup
# The kubelet and runc use these controllers: enable them for the children of the root.
# shellcheck disable=SC2013  # the file is one line of controller names
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

start_containerd
# At every boot (again after a reboot: importing an image containerd has is quick): the images
# cluster.sh put here, and what `import` brought.
rm -f "$N"/images/*.done "$N"/images/*.failed "$N"/import/*.done "$N"/import/*.failed
for f in "$N"/images/*.tar "$N"/import/*.tar; do [ -e "$f" ] && import_one "$f"; done
# shellcheck disable=SC2012  # only counts and shows the marker files import_one writes
log "images imported: $(ls "$N"/images/*.done "$N"/import/*.done 2>/dev/null | wc -l), failed: $(ls "$N"/images/*.failed "$N"/import/*.failed 2>/dev/null | tr '\n' ' ')"

start_kubelet
run kube-proxy "$BIN/kube-proxy" --config="$N/kube-proxy.yaml"

# `scripts/cluster.sh import` drops archives into import/ and waits for FILE.done or FILE.failed;
# `exec --node` drops scripts into cmd/ and waits for NAME.rc. Commands from before a reboot are
# not run again.
mkdir -p "$N/cmd"
rm -f "$N"/cmd/*
(while :; do
  for f in "$N"/import/*.tar; do
    [ -e "$f" ] && [ ! -e "$f.done" ] && [ ! -e "$f.failed" ] && import_one "$f"
  done
  for f in "$N"/cmd/*.sh; do
    # shellcheck disable=SC2015  # skip a glob that matched nothing and a command already run
    [ -e "$f" ] && [ ! -e "${f%.sh}.rc" ] || continue
    # shellcheck disable=SC1090  # a command script `scripts/cluster.sh exec --node` dropped here
    (. "$f") > "${f%.sh}.out" 2>&1 < /dev/null
    echo $? > "${f%.sh}.rc.tmp" && mv "${f%.sh}.rc.tmp" "${f%.sh}.rc"
  done
  sleep 0.5
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
