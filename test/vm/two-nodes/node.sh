#!/bin/sh
# One node of the two-node test (started by test/vm/two-nodes.sh through test/vm/stage2.sh), run
# as root in the VM with role=1 or role=2 on the kernel command line. Sets the node up (modules,
# eth0 with 10.77.0.ROLE/24 on the shared link, Soft-RoCE rxe0 on it, Debian's containerd with
# its CRI plugin and the CNI plugins, the product's images), then runs the phases in phases.sh in
# step with the other node (barriers in the shared 9p directory). Every wait is bounded; output
# goes to files; the last line is "N passed, M failed".
# Kernel command line: role= build= src= shared= pods= images= (and stage2.sh's vmout= kdir= kver=).
set -u
for arg in $(cat /proc/cmdline); do
  case "$arg" in
    role=*) ME=${arg#role=} ;;
    build=*) BUILD=${arg#build=} ;;
    src=*) SRC=${arg#src=} ;;
    shared=*) SHARED=${arg#shared=} ;;
    pods=*) PODS=${arg#pods=} ;;
    images=*) IMAGES=${arg#images=} ;;
  esac
done
PEER=$((3 - ME))
MYIP=10.77.0.$ME
PEERIP=10.77.0.$PEER
PY=/usr/bin/python3            # Debian's python (grpc, yaml), never another one first on PATH
AGENT=$BUILD/agent/erdma-agent
ECHO=$SRC/test/vm/smc_echo.py
HERE=$SRC/test/vm/two-nodes
T=${SCRATCH:-/run/scratch}
W=$T/work
mkdir -p "$W"
passed=0
failed=0
export ME PEER MYIP PEERIP PY AGENT ECHO HERE T W SHARED PODS IMAGES BUILD SRC KDIR KVER VMOUT
# every kubelet.py command of this node imports the same compiled protos (python start-up under TCG)
export KUBELET_STANDIN_PROTO_CACHE=$T/kubelet-protos
. "$HERE/lib.sh"
t_start=$(now)
log "node $ME ($MYIP), kernel $(uname -r), build $BUILD"

if ! mount -t 9p -o trans=virtio,version=9p2000.L,msize=512000 shared "$SHARED"; then
  fail "mount the shared directory (9p tag shared)"
  echo "$passed passed, $failed failed"
  exit 1
fi
trap 'put abort "$(now)"' EXIT

# --- modules ---------------------------------------------------------------------------------------
cat > "$T/modprobe" <<EOS
#!/bin/sh
exec /sbin/modprobe -d "$KDIR" -S "$KVER" "\$@"
EOS
chmod +x "$T/modprobe"
echo "$T/modprobe" > /proc/sys/kernel/modprobe
mods_ok=1
# crc32_generic first: rdma_rxe asks the crypto API for crc32 by name. One name per call.
for m in virtio_net crc32_generic smc smc_diag rdma_rxe ib_uverbs rdma_ucm overlay bridge veth ipvlan; do
  "$T/modprobe" "$m" || { mods_ok=0; log "modprobe $m failed"; }
done
check "kernel modules (virtio_net, smc, smc_diag, rdma_rxe, ib_uverbs, rdma_ucm, overlay, bridge, veth, ipvlan)" [ "$mods_ok" = 1 ]

# --- the node's network: eth0 on the shared link, rxe0 on it ---------------------------------------------
ip link set lo up
ip link set eth0 up
ip addr add "$MYIP/24" dev eth0
echo 1 > /proc/sys/net/ipv4/ip_forward
if run rxe 30 sh -c 'rdma link add rxe0 type rxe netdev eth0 && rdma link show'; then
  pass "Soft-RoCE rxe0 on eth0"
else
  fail "Soft-RoCE rxe0 on eth0"
fi

# --- containerd, runc, CNI ------------------------------------------------------------------------------
# The root is the host's, read-only: containerd and libcni want /var/lib/containerd and
# /var/lib/cni, so /var/lib becomes a tmpfs (nothing else here needs the host's /var/lib).
t_ctr=$(now)
mount -t cgroup2 cgroup2 /sys/fs/cgroup
mount -t tmpfs tmpfs /var/lib
mkdir -p /var/lib/containerd /var/lib/cni /var/lib/kubelet /run/containerd /run/cni/net.d /dev/shm /dev/pts \
  /var/lib/erdma-controller/lib
mount -t tmpfs tmpfs /dev/shm
mount -t devpts devpts /dev/pts
# PID 1 is a shell, so every mount is private; a systemd node has "/" shared. The agent's
# /var/run/netns volume (HostToContainer) only sees netns files made after it started when
# /run/netns is a shared mount before containerd makes any, and containerd refuses the volume
# ("path /var/run/netns is mounted on / but it is not a shared or slave mount") unless the mount
# it finds for the literal path /var/run/netns, which is "/", is shared: so "/" is made rshared too.
mount --bind /run/netns /run/netns && mount --make-shared /run/netns
mount --make-rshared /
sed "s|@PAUSE@|localhost/erdma-controller/pause:1|" "$HERE/containerd.toml" > "$T/containerd.toml"
"$PY" "$HERE/cni.py" --role "$ME" --layout bridge --out /run/cni/net.d/10-pods.conflist
ip route add "10.244.$PEER.0/24" via "$PEERIP"
/usr/bin/containerd --config "$T/containerd.toml" > "$W/containerd.log" 2>&1 &
ctr_pid=$!
echo "$ctr_pid" > "$T/containerd.pid"
ctr_up() { ctr --timeout 5s version > /dev/null 2>&1; }
ctr_wait() {  # SECONDS: until containerd answers or its process is gone
  cw_end=$(($(cut -d. -f1 /proc/uptime) + $1))
  while ! ctr_up; do
    kill -0 "$(cat "$T/containerd.pid")" 2> /dev/null || return 1
    [ "$(cut -d. -f1 /proc/uptime)" -ge "$cw_end" ] && return 1
    sleep 0.3
  done
}
if ctr_wait 90; then
  pass "containerd $(ctr --timeout 5s version 2> /dev/null | awk '/Version:/ {print $2; exit}') with its CRI plugin answers ($(since "$t_ctr") s)"
  result "containerd ready: $(since "$t_ctr") s after start"
else
  fail "containerd started"
  tail -20 "$W/containerd.log" | sed 's/^/    containerd| /'
fi
t_img=$(now)
imp_ok=1
for i in pause workload erdma-agent; do
  quiet "import-$i" 120 ctr -n k8s.io images import "$IMAGES/$i.tar" || { imp_ok=0; cat "$W/import-$i.out"; }
done
quiet images 30 ctr -n k8s.io images ls -q
for ref in localhost/erdma-controller/pause:1 localhost/erdma-controller/workload:1 \
           registry.example.com/erdma-controller/erdma-agent:0.1.0; do
  grep -qx "$ref" "$W/images.out" || { imp_ok=0; log "image $ref not in containerd"; }
done
check "images imported into containerd (pause, workload, erdma-agent) ($(since "$t_img") s)" [ "$imp_ok" = 1 ]

# --- the link between the nodes: plain TCP, node 1 -> node 2 ------------------------------------------------
tcp_link() {
  if [ "$ME" = 2 ]; then
    rm -f "$W/link.port"
    timeout -s KILL 90 "$PY" "$ECHO" serve --bind "$MYIP" --port-file "$W/link.port" --timeout 80 > "$W/link.server" 2>&1 &
    lpid=$!
    wait_until 30 test -s "$W/link.port" && put link.port "$(cat "$W/link.port")"
    wait "$lpid"
  else
    lport=$(get link.port 120) || return 1
    timeout -s KILL 90 "$PY" "$ECHO" connect --to "$PEERIP:$lport" --bytes 1048576 --timeout 60 > "$W/link.client" 2>&1 &&
      grep -q '^OK bytes=1048576' "$W/link.client"
  fi
}
if [ "$ME" = 1 ]; then
  check "TCP node 1 -> node 2 over the shared link (1 MiB, checksum ok)" tcp_link
else
  check "TCP server on node 2 answered node 1" tcp_link
fi

. "$HERE/phases.sh"

log "node $ME done after $(since "$t_start") s"
echo "$passed passed, $failed failed"
