#!/usr/bin/env bash
# A one-node Kubernetes on this machine, for trying erdma-controller against a real kubelet:
#   scripts/cluster.sh up [--vm-nodes N]
#                                       start it (builds the binaries first when needed), wait until
#                                       the node is Ready, print `export KUBECONFIG=...`; with
#                                       --vm-nodes (or ERDMA_VM_NODES=N), also N worker nodes that
#                                       are qemu VMs with SMC and Soft-RoCE (below)
#   scripts/cluster.sh status           what runs, and the node's readiness
#   scripts/cluster.sh down             stop everything and remove every trace (also after a
#                                       failed `up`; safe to run twice)
#   scripts/cluster.sh import FILE.tar  import an OCI archive (images/build-images.sh) into the
#                                       node's containerd, namespace k8s.io
#   scripts/cluster.sh exec CMD...      run CMD on the node: in the sandbox's namespaces (its /dev,
#                                       /run, /var, network, processes), e.g. to add device nodes
#   scripts/cluster.sh exec --node erdma-vmN CMD...
#                                       run CMD (a shell command line) as root on a VM node; its
#                                       output and exit status come back (at most 120 s)
#   scripts/cluster.sh restart NAME     stop one component (kubelet, containerd, kube-apiserver, ...)
#                                       and start it again as `up` did; waits until it runs again;
#                                       erdma-vmN reboots that VM node (its services stopped and its
#                                       disk synced first)
# No kubeadm, no systemd, no registry. Kubernetes and etcd are built from pinned Go modules by
# test/cluster/build-k8s.sh; runc and the CNI plugins are Debian's, and so is containerd (1.6)
# unless ERDMA_CONTAINERD says otherwise (below). Everything runs in
# one "node sandbox": private mount, network, PID and UTS namespaces. Its network namespace holds
# the node address, the pods' bridge and the Service rules, so no address or rule is added to
# this machine's network; kubectl reaches the API server through a forwarder listening on
# 127.0.0.1:${ERDMA_CLUSTER_PORT:-6443} here. See test/cluster/README.md.
#
# Environment: ERDMA_CLUSTER_DIR (state, logs, certificates; default /run/erdma-cluster),
# ERDMA_CLUSTER_PORT (default 6443), ERDMA_K8S_CACHE (test/cluster/build-k8s.sh), and for `up`
# ERDMA_CONTAINERD: `debian` (the default: Debian's containerd 1.6, no CDI), `cdi` (containerd
# 2.x with CDI, built by test/cluster/build-containerd.sh, cached in ERDMA_CONTAINERD_CACHE), or
# the absolute path of a directory holding a containerd 2.x's containerd, containerd-shim-runc-v2
# and ctr. With 2.x the node reads CDI specs from its private /var/run/cdi.
#
# VM worker nodes (--vm-nodes N, at most 4): erdma-vm1..N, each a qemu VM (TCG) booting the kernel
# test/vm/build-kernel.sh builds (SMC, SMC-D's loopback, Soft-RoCE sending from any network
# namespace), this machine's root read-only over 9p, and test/cluster/vm-node/guest.sh as its
# init: containerd (the same choice as above), the kubelet and kube-proxy of the same release,
# Soft-RoCE rxe0 on its eth0 as the node's RDMA card, and a CNI chain that gives every pod an rxe
# device of its own (test/cluster/vm-node/erdma-rxe). The VMs' NICs are taps on a bridge in the
# sandbox's network namespace (10.255.1.0/24, the gateway 10.255.1.1 is the sandbox): the API server
# and the kubelets reach each other directly, pods on different nodes by routes. qemu runs inside
# the sandbox, so `down` ends the VMs with everything else; `restart erdma-vmN` reboots one.
# ERDMA_VM_SMP (vCPUs, default 1) and ERDMA_VM_MEM (MiB, default 2048) size each VM, ERDMA_VM_DISK
# (default 8G, sparse) its disk, which holds the guest's /var/lib across a reboot.
# Needs root and scripts/install-deps.sh's packages (containerd, runc, containernetworking-plugins,
# iproute2, iptables, openssl, curl, python3, gcc and busybox-static for the images).
set -euo pipefail

SRC=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
SELF=$SRC/scripts/cluster.sh
STATE=${ERDMA_CLUSTER_DIR:-/run/erdma-cluster}
PORT=${ERDMA_CLUSTER_PORT:-6443}
NODE=erdma-node
# These addresses exist only inside the sandbox's network namespace.
NODE_IP=10.255.0.1          # the node's InternalIP, on the sandbox's eth0
POD_CIDR=10.88.0.0/16       # the CNI bridge cni0
SERVICE_CIDR=10.96.0.0/16   # virtual, kube-proxy's iptables rules
KUBERNETES_SVC=10.96.0.1
# VM worker nodes: the bridge's address in the sandbox, node i at .(10+i), its pods in 10.89.i.0/24.
VM_GATEWAY=10.255.1.1
VM_PREFIX=24
vm_ip() { echo "10.255.1.$((10 + $1))"; }
vm_pod_cidr() { echo "10.89.$1.0/24"; }
# Every pod range (the host node's and the VM nodes'): kube-proxy's clusterCIDR.
CLUSTER_CIDR=10.88.0.0/15
# Every cgroup the kubelet and runc create is under this one, in every hierarchy.
CGROUP_ROOT=erdma-cluster
PAUSE_IMAGE=localhost/erdma-controller/pause:1
# containerd 2.x reads CDI specs from here (inside the sandbox: its private /run).
CDI_DIR=/var/run/cdi
export PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin

# fd 3: stderr, also where wait_until's conditions report why they gave up.
exec 3>&2
log() { echo "cluster: $*" >&3; }
die() { log "$*"; exit 1; }

# wait_until WHAT SECONDS CMD...: runs CMD every 0.2 s until it succeeds; fails after SECONDS.
wait_until() {
  local what=$1 secs=$2
  shift 2
  local end=$((SECONDS + secs))
  until "$@" >/dev/null 2>&1; do
    [ "$SECONDS" -lt "$end" ] || { log "timed out after $secs s waiting for $what"; return 1; }
    sleep 0.2
  done
}

# The sandbox's PID 1, seen from here: the child of the `unshare` recorded at start-up.
sandbox_init() {
  local pid
  pid=$(cat "$STATE/sandbox.pid" 2>/dev/null) || return 1
  [ -r "/proc/$pid/cmdline" ] && tr '\0' ' ' < "/proc/$pid/cmdline" | grep -q "unshare .* _init $STATE" || return 1
  pid=$(cut -d' ' -f1 "/proc/$pid/task/$pid/children" 2>/dev/null) || return 1
  [ -n "$pid" ] && echo "$pid"
}

# --------------------------------------------------------------------------------------------
# Certificates and configuration (written by `up`, read inside the sandbox)

pki() {
  local d=$STATE/pki
  mkdir -p "$d"
  ec() { openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256 -out "$d/$1.key" 2>/dev/null; }
  ca() {  # NAME CN
    ec "$1"
    openssl req -x509 -new -key "$d/$1.key" -out "$d/$1.crt" -days 3650 -subj "/CN=$2" \
      -addext basicConstraints=critical,CA:TRUE -addext keyUsage=critical,keyCertSign,cRLSign 2>/dev/null
  }
  cert() {  # NAME CA SUBJECT serverAuth|clientAuth [SANS]
    ec "$1"
    openssl req -new -key "$d/$1.key" -subj "$3" -out "$d/$1.csr" 2>/dev/null
    {
      echo "basicConstraints=CA:FALSE"
      echo "keyUsage=critical,digitalSignature,keyEncipherment"
      echo "extendedKeyUsage=$4"
      [ -z "${5:-}" ] || echo "subjectAltName=$5"
    } > "$d/$1.ext"
    openssl x509 -req -in "$d/$1.csr" -CA "$d/$2.crt" -CAkey "$d/$2.key" -set_serial "0x$(openssl rand -hex 8)" \
      -days 365 -extfile "$d/$1.ext" -out "$d/$1.crt" 2>/dev/null
    rm -f "$d/$1.csr" "$d/$1.ext"
  }
  ca ca erdma-cluster-ca
  ca front-proxy-ca erdma-cluster-front-proxy-ca
  cert apiserver ca "/CN=kube-apiserver" serverAuth \
    "DNS:kubernetes,DNS:kubernetes.default,DNS:kubernetes.default.svc,DNS:kubernetes.default.svc.cluster.local,DNS:localhost,IP:127.0.0.1,IP:$NODE_IP,IP:$KUBERNETES_SVC,IP:$VM_GATEWAY"
  cert apiserver-kubelet-client ca "/O=system:masters/CN=kube-apiserver-kubelet-client" clientAuth
  cert front-proxy-client front-proxy-ca "/CN=front-proxy-client" clientAuth
  cert admin ca "/O=system:masters/CN=erdma-cluster-admin" clientAuth
  cert kubelet ca "/O=system:nodes/CN=system:node:$NODE" clientAuth
  cert kubelet-serving ca "/CN=$NODE" serverAuth "DNS:$NODE,IP:$NODE_IP"
  cert controller-manager ca "/CN=system:kube-controller-manager" clientAuth
  cert scheduler ca "/CN=system:kube-scheduler" clientAuth
  cert kube-proxy ca "/CN=system:kube-proxy" clientAuth
  local i name
  for i in $(seq 1 "$VM_NODES"); do
    name=erdma-vm$i
    cert "kubelet-$name" ca "/O=system:nodes/CN=system:node:$name" clientAuth
    cert "kubelet-serving-$name" ca "/CN=$name" serverAuth "DNS:$name,IP:$(vm_ip "$i")"
  done
  ec sa
  openssl pkey -in "$d/sa.key" -pubout -out "$d/sa.pub" 2>/dev/null
  chmod 600 "$d"/*.key
}

kubeconfig() {  # FILE SERVER CERT-NAME [PKI-DIR, as the reader sees it]
  local pki=${4:-$STATE/pki}
  cat > "$1" <<EOF
apiVersion: v1
kind: Config
clusters:
- name: erdma-cluster
  cluster:
    server: $2
    certificate-authority: $pki/ca.crt
users:
- name: $3
  user:
    client-certificate: $pki/$3.crt
    client-key: $pki/$3.key
contexts:
- name: erdma-cluster
  context: {cluster: erdma-cluster, user: $3}
current-context: erdma-cluster
EOF
}

# kubelet_yaml PKI-DIR SERVING-CERT-NAME [EXTRA-LINES]: a kubelet's configuration, paths as the
# kubelet sees them.
kubelet_yaml() {
  cat <<EOF
apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
authentication:
  anonymous: {enabled: false}
  webhook: {enabled: true}
  x509: {clientCAFile: $1/ca.crt}
authorization: {mode: Webhook}
tlsCertFile: $1/$2.crt
tlsPrivateKeyFile: $1/$2.key
readOnlyPort: 0
healthzBindAddress: 127.0.0.1
containerRuntimeEndpoint: unix:///run/containerd/containerd.sock
# containerd 1.6 has no RuntimeConfig CRI call: kubelet 1.37 falls back to this (removal in 1.38).
# containerd 2.x answers it (cgroupfs: SystemdCgroup = false), and the kubelet takes its answer.
cgroupDriver: cgroupfs
failSwapOn: false
registerNode: true
clusterDomain: cluster.local
resolvConf: /etc/resolv.conf
# Under /var/lib/kubelet: the default (/usr/libexec/...) would be created on this machine (or fail
# on a VM node's read-only root). The controller-manager's --flex-volume-plugin-dir names it too.
volumePluginDir: /var/lib/kubelet/volume-plugins
# No registry to pull the pause image back from: never collect images; evict only when nearly full.
imageGCHighThresholdPercent: 100
evictionHard: {memory.available: 100Mi, nodefs.available: 2%, imagefs.available: 2%, nodefs.inodesFree: 2%}
# Secret and ConfigMap volumes are refreshed at each pod sync: 10 s instead of the default minute,
# so a certificate rotation reaches the webhook's pods in seconds (production nodes take 1-2 min).
syncFrequency: 10s
${3:-}
EOF
}

# containerd_toml ROOT NETD CNIBIN: containerd's configuration for a node, paths as it sees them.
containerd_toml() {
  # Debian's 1.6 reads version 2; 2.x reads version 3 (and would migrate 2), whose CRI sections
  # are laid out differently.
  local version=2 cri=$SRC/test/cluster/containerd-cri.toml
  if [ "$CONTAINERD_MODE" != debian ]; then
    version=3 cri=$SRC/test/cluster/containerd2-cri.toml
  fi
  cat <<EOF
version = $version
root = "$1"
state = "/run/containerd"
[grpc]
  address = "/run/containerd/containerd.sock"
EOF
  sed -e "s|@OPT@|/run/containerd-opt|" -e "s|@PAUSE@|$PAUSE_IMAGE|" -e "s|@NETD@|$2|" -e "s|@CNIBIN@|$3|" \
    -e "s|@SHIM@|$CONTAINERD_BIN/containerd-shim-runc-v2|" -e "s|@CDI@|$CDI_DIR|" "$cri"
}

# kube_proxy_yaml KUBECONFIG NODE-NAME
kube_proxy_yaml() {
  cat <<EOF
apiVersion: kubeproxy.config.k8s.io/v1alpha1
kind: KubeProxyConfiguration
clientConnection: {kubeconfig: $1}
mode: iptables
hostnameOverride: $2
clusterCIDR: $CLUSTER_CIDR
healthzBindAddress: 127.0.0.1:10256
metricsBindAddress: 127.0.0.1:10249
# Leave the conntrack table size and timeouts alone: the size is global to the machine.
conntrack: {maxPerCore: 0, min: 0, tcpEstablishedTimeout: 0s, tcpCloseWaitTimeout: 0s}
EOF
}

# bridge_conflist POD-CIDR [CHAIN-STEP-JSON]: the pods' network on a node: the bridge cni0 with
# host-local addresses, then the chain step if any, then loopback.
bridge_conflist() {
  cat <<EOF
{"cniVersion": "1.0.0", "name": "erdma-cluster", "plugins": [
  {"type": "bridge", "bridge": "cni0", "isGateway": true, "ipMasq": false,
   "ipam": {"type": "host-local", "ranges": [[{"subnet": "$1"}]], "dataDir": "/run/cni/ipam",
            "routes": [{"dst": "0.0.0.0/0"}]}},${2:+
  $2,}
  {"type": "loopback"}]}
EOF
}

configs() {
  local c=$STATE/config
  mkdir -p "$c"
  kubeconfig "$STATE/admin.kubeconfig" "https://127.0.0.1:$PORT" admin
  for n in kubelet controller-manager scheduler kube-proxy; do
    kubeconfig "$c/$n.kubeconfig" https://127.0.0.1:6443 "$n"
  done
  # This host mounts cgroup v1 (hybrid); kubelet 1.35+ refuses v1 unless told.
  kubelet_yaml "$STATE/pki" kubelet-serving "cgroupRoot: /$CGROUP_ROOT
failCgroupV1: false
clusterDNS: [$NODE_IP]" > "$c/kubelet.yaml"
  kube_proxy_yaml "$c/kube-proxy.kubeconfig" "$NODE" > "$c/kube-proxy.yaml"
  mkdir -p "$STATE/containerd/net.d"
  containerd_toml "$STATE/containerd/root" "$STATE/containerd/net.d" /usr/lib/cni > "$STATE/containerd/config.toml"
  bridge_conflist "$POD_CIDR" > "$STATE/containerd/net.d/10-erdma-cluster.conflist"
}

# vm_node_config I: the directory the VM node erdma-vmI reads over 9p (mounted on /mnt in the
# guest): its node.env, certificates, kubeconfigs, kubelet, kube-proxy, containerd and CNI
# configuration, the images it imports at boot, and its logs. After the images are built.
vm_node_config() {
  local i=$1 name=erdma-vm$1 d=$STATE/vm/erdma-vm$1 g=/mnt j routes=""
  mkdir -p "$d/pki" "$d/logs" "$d/images" "$d/import"
  # The node's disk, /var/lib in the guest: the kubelet's state (its device checkpoint among it),
  # containerd's store and the agent's host directory survive a reboot, as on a real node. Sparse.
  truncate -s "${ERDMA_VM_DISK:-8G}" "$d/disk.img"
  mkfs.ext4 -q -F -L "$name" "$d/disk.img" || die "mkfs.ext4 $d/disk.img failed"
  cp "$STATE/pki/ca.crt" "$STATE/pki/kubelet-$name.crt" "$STATE/pki/kubelet-$name.key" \
    "$STATE/pki/kubelet-serving-$name.crt" "$STATE/pki/kubelet-serving-$name.key" \
    "$STATE/pki/kube-proxy.crt" "$STATE/pki/kube-proxy.key" "$d/pki/"
  kubeconfig "$d/kubelet.kubeconfig" "https://$VM_GATEWAY:6443" "kubelet-$name" "$g/pki"
  kubeconfig "$d/kube-proxy.kubeconfig" "https://$VM_GATEWAY:6443" kube-proxy "$g/pki"
  kubelet_yaml "$g/pki" "kubelet-serving-$name" "clusterDNS: [$VM_GATEWAY]" > "$d/kubelet.yaml"
  kube_proxy_yaml "$g/kube-proxy.kubeconfig" "$name" > "$d/kube-proxy.yaml"
  containerd_toml /var/lib/containerd /run/cni/net.d /run/cni/bin > "$d/containerd.toml"
  # The chain step gives each pod an rxe device of its own, except in plain-veth (the bridge's veth
  # only) and ipvlan-rxe (an ipvlan on the node's eth0 with an address of the node subnet:
  # 10.255.1.1I0-1I7 on erdma-vmI).
  local ipvlan_addresses
  ipvlan_addresses=$(for k in $(seq 0 7); do printf '"10.255.1.%d/%d",' $((100 + 10 * i + k)) "$VM_PREFIX"; done)
  bridge_conflist "$(vm_pod_cidr "$i")" '{"type": "erdma-rxe", "skipNamespaces": ["plain-veth"],
   "ipvlan": {"namespaces": ["ipvlan-rxe"], "master": "eth0", "addresses": ['"${ipvlan_addresses%,}"']}}' > "$d/cni.conflist"
  for j in $(seq 1 "$VM_NODES"); do
    [ "$j" = "$i" ] || routes+="$(vm_pod_cidr "$j")@$(vm_ip "$j") "
  done
  printf '%s=%q\n' NAME "$name" IP "$(vm_ip "$i")" PREFIX "$VM_PREFIX" GATEWAY "$VM_GATEWAY" \
    ROUTES "$routes" BIN "$BIN" CONTAINERD_BIN "$CONTAINERD_BIN" CTR "$CTR" SRC "$SRC" \
    LABELS "erdma.test/vm-node=true" > "$d/node.env"
  ln "$STATE/images/pause.tar" "$STATE/images/workload.tar" "$d/images/"
}

# --------------------------------------------------------------------------------------------
# Inside the sandbox: PID 1 of its PID namespace (started by `up` through unshare)

sandbox_main() {
  # shellcheck disable=SC1091
  . "$STATE/env"
  local L=$STATE/logs P=$STATE/pki C=$STATE/config
  declare -A pids=()
  mount --make-rprivate /
  # A private /run (containerd's socket and state, runc, netns files, CNI leases), keeping the state
  # directory: it is bound back from the working directory, which the new /run hides by path only.
  cd "$STATE"
  # -n: no utab entry; libmount would create /run/mount on this machine's /run for it.
  mount -n -t tmpfs -o mode=755 tmpfs /run
  mkdir -p "$STATE"
  mount --no-canonicalize --bind . "$STATE"
  cd /
  # /var: writes (kubelet's /var/log/containers, hostPath DirectoryOrCreate volumes, CNI's cache)
  # land in the state directory, never in this machine's /var. kubelet's root and the pods' logs
  # are plain directories of the state directory bound in.
  mkdir -p "$STATE"/var/{upper,work} "$STATE"/kubelet "$STATE"/pod-logs
  mount -t overlay overlay -o "lowerdir=/var,upperdir=$STATE/var/upper,workdir=$STATE/var/work" /var
  mkdir -p /var/lib/kubelet /var/log/pods
  mount --bind "$STATE/kubelet" /var/lib/kubelet
  mount --bind "$STATE/pod-logs" /var/log/pods
  # /dev: an overlay with a tmpfs upper layer, so device directories a pod creates (hostPath
  # DirectoryOrCreate under /dev) stay here.
  mkdir -p "$STATE"/dev/{lower,layer}
  mount --rbind /dev "$STATE/dev/lower"
  mount -t tmpfs tmpfs "$STATE/dev/layer"
  mkdir "$STATE"/dev/layer/{up,work}
  mount -t overlay overlay -o "lowerdir=$STATE/dev/lower,upperdir=$STATE/dev/layer/up,workdir=$STATE/dev/layer/work" /dev
  local sub
  for sub in pts shm mqueue; do
    if mountpoint -q "$STATE/dev/lower/$sub"; then mount --rbind "$STATE/dev/lower/$sub" "/dev/$sub"; fi
  done
  # kubelet sets these machine-wide sysctls to its preferred values (or, with
  # protectKernelDefaults, refuses to start): in the sandbox's /proc it reads its own values and
  # leaves the machine's alone.
  mkdir -p "$STATE/sysctl"
  local k v
  for kv in vm/overcommit_memory=1 vm/panic_on_oom=0 kernel/panic=10 kernel/panic_on_oops=1 \
            kernel/keys/root_maxkeys=1000000 kernel/keys/root_maxbytes=25000000; do
    k=${kv%=*} v=${kv#*=}
    [ "$(cat "/proc/sys/$k")" = "$v" ] && continue
    echo "$v" > "$STATE/sysctl/${k//\//.}"
    mount --bind "$STATE/sysctl/${k//\//.}" "/proc/sys/$k"
  done
  # Shared inside the sandbox, as a systemd host's mounts are: kubelet and containerd refuse
  # HostToContainer and Bidirectional propagation (the agent's /run/containerd, /var/run/netns)
  # from a private mount. The peer groups are new ones: nothing propagates to this machine.
  mount --make-rshared /
  hostname "$NODE"
  ip link set lo up
  # The node's interface, as on a real node (the agent's static device config names a netdev): one
  # end of a veth pair whose other end stays here unused (this kernel may lack the dummy type).
  ip link add eth0 type veth peer name eth0-peer
  ip addr add "$NODE_IP/24" dev eth0
  ip link set eth0-peer up
  ip link set eth0 up
  # A default route, as every node has: without one a host-network pod cannot even start a
  # connection to a Service's ClusterIP (the route lookup comes before kube-proxy's DNAT), and
  # in-cluster API clients (the agent's DRA driver) dial https://$KUBERNETES_SERVICE_HOST.
  ip route add default dev eth0
  # The VM worker nodes' link: a bridge with a tap per VM, and the routes to their pods.
  local i
  if [ "${VM_NODES:-0}" -gt 0 ]; then
    echo 1 > /proc/sys/net/ipv4/ip_forward
    ip link add vmbr0 type bridge
    ip addr add "$VM_GATEWAY/$VM_PREFIX" dev vmbr0
    ip link set vmbr0 up
    for i in $(seq 1 "$VM_NODES"); do
      ip tuntap add "vmtap$i" mode tap
      ip link set "vmtap$i" master vmbr0 up
      ip route add "$(vm_pod_cidr "$i")" via "$(vm_ip "$i")"
    done
  fi

  declare -A cmds=()
  start() {  # NAME CMD...: in the background, output appended to logs/NAME.log
    local name=$1
    shift
    cmds[$name]=$(printf '%q ' "$@")
    "$@" >> "$L/$name.log" 2>&1 < /dev/null &
    pids[$name]=$!
  }
  alive() { kill -0 "${pids[$1]}" 2>/dev/null; }
  up_or_dead() {  # NAME CMD...: succeeds when CMD does; stops waiting when NAME has exited
    local name=$1
    shift
    alive "$name" || { log "$name exited: $(tail -n 20 "$L/$name.log")"; exit 1; }
    "$@"
  }
  stop_group() {  # SECONDS NAME...: TERM to each, wait until all have exited or SECONDS passed
    local secs=$1 name t0=$SECONDS
    shift
    for name; do [ -z "${pids[$name]:-}" ] || kill -TERM "${pids[$name]}" 2>/dev/null || true; done
    local n=0 left
    while :; do
      left=""
      for name; do [ -z "${pids[$name]:-}" ] || ! alive "$name" || left+="$name "; done
      # shellcheck disable=SC2015  # break when either part fails
      [ -n "$left" ] && [ $n -lt $((secs * 5)) ] || break
      sleep 0.2
      n=$((n + 1))
    done
    log "stopped $* after $((SECONDS - t0)) s${left:+; still running: $left(killed with the sandbox)}"
  }
  stop_all() {
    # Clients before the API server, the API server before etcd; a bound on each step.
    local vms=() i
    for i in $(seq 1 "${VM_NODES:-0}"); do vms+=("erdma-vm$i"); done
    stop_group 10 kubelet kube-proxy "${vms[@]}"
    stop_group 5 kube-controller-manager kube-scheduler dns
    stop_group 10 kube-apiserver
    stop_group 5 etcd containerd forward
    # Leaving PID 1 kills whatever is left here: containers, shims, anything that ignored TERM.
    exit 0
  }
  trap stop_all TERM INT
  # `restart NAME` (on this machine) writes the name and sends USR1: stop it, start it again.
  restart_one() {
    local name
    name=$(cat "$STATE/restart.request" 2>/dev/null) || return 0
    if [ -z "${cmds[$name]:-}" ]; then
      echo "unknown component $name" > "$STATE/restart.done"
      return 0
    fi
    log "restarting $name"
    stop_group 10 "$name"
    eval "start $name ${cmds[$name]}"
    echo "restarted $name" > "$STATE/restart.done"
  }
  trap restart_one USR1

  start forward /usr/bin/python3 "$SRC/test/cluster/forward.py" serve --to 127.0.0.1:6443
  # Speed over durability: a throwaway test cluster on a slow disk.
  start etcd "$BIN/etcd" --name "$NODE" --data-dir "$STATE/etcd" --unsafe-no-fsync \
    --listen-client-urls http://127.0.0.1:2379 --advertise-client-urls http://127.0.0.1:2379 \
    --listen-peer-urls http://127.0.0.1:2380 --initial-advertise-peer-urls http://127.0.0.1:2380 \
    --initial-cluster "$NODE=http://127.0.0.1:2380" --listen-metrics-urls http://127.0.0.1:2381
  start containerd "$CONTAINERD_BIN/containerd" --config "$STATE/containerd/config.toml"
  wait_until etcd 60 up_or_dead etcd curl -sf http://127.0.0.1:2379/health
  start kube-apiserver "$BIN/kube-apiserver" --etcd-servers=http://127.0.0.1:2379 \
    --bind-address=0.0.0.0 --secure-port=6443 --advertise-address="$NODE_IP" \
    --tls-cert-file="$P/apiserver.crt" --tls-private-key-file="$P/apiserver.key" \
    --client-ca-file="$P/ca.crt" --authorization-mode=Node,RBAC \
    --enable-admission-plugins=NodeRestriction,PodSecurity --allow-privileged=true \
    --service-cluster-ip-range="$SERVICE_CIDR" \
    --service-account-key-file="$P/sa.pub" --service-account-signing-key-file="$P/sa.key" \
    --service-account-issuer=https://kubernetes.default.svc.cluster.local \
    --kubelet-client-certificate="$P/apiserver-kubelet-client.crt" \
    --kubelet-client-key="$P/apiserver-kubelet-client.key" \
    --kubelet-certificate-authority="$P/ca.crt" --kubelet-preferred-address-types=InternalIP \
    --enable-aggregator-routing=true \
    --requestheader-client-ca-file="$P/front-proxy-ca.crt" --requestheader-allowed-names=front-proxy-client \
    --requestheader-username-headers=X-Remote-User --requestheader-group-headers=X-Remote-Group \
    --requestheader-extra-headers-prefix=X-Remote-Extra- \
    --proxy-client-cert-file="$P/front-proxy-client.crt" --proxy-client-key-file="$P/front-proxy-client.key"
  wait_until containerd 60 up_or_dead containerd "$CTR" --address /run/containerd/containerd.sock version
  [ "$CONTAINERD_MODE" = debian ] || mkdir -p "$CDI_DIR"
  local image
  for image in pause workload; do
    "$CTR" --address /run/containerd/containerd.sock -n k8s.io images import "$STATE/images/$image.tar" > /dev/null
  done
  wait_until kube-apiserver 180 up_or_dead kube-apiserver curl -sf --cacert "$P/ca.crt" https://127.0.0.1:6443/readyz
  start kube-controller-manager "$BIN/kube-controller-manager" --kubeconfig="$C/controller-manager.kubeconfig" \
    --authentication-kubeconfig="$C/controller-manager.kubeconfig" \
    --authorization-kubeconfig="$C/controller-manager.kubeconfig" \
    --bind-address=127.0.0.1 --leader-elect=false --use-service-account-credentials \
    --root-ca-file="$P/ca.crt" --service-account-private-key-file="$P/sa.key" \
    --cluster-signing-cert-file="$P/ca.crt" --cluster-signing-key-file="$P/ca.key" \
    --service-cluster-ip-range="$SERVICE_CIDR" --cluster-name=erdma-cluster \
    --flex-volume-plugin-dir=/var/lib/kubelet/volume-plugins
  start kube-scheduler "$BIN/kube-scheduler" --kubeconfig="$C/scheduler.kubeconfig" \
    --authentication-kubeconfig="$C/scheduler.kubeconfig" --authorization-kubeconfig="$C/scheduler.kubeconfig" \
    --bind-address=127.0.0.1 --leader-elect=false
  start kubelet "$BIN/kubelet" --config="$C/kubelet.yaml" --kubeconfig="$C/kubelet.kubeconfig" \
    --hostname-override="$NODE" --node-ip="$NODE_IP" --v=2
  start kube-proxy "$BIN/kube-proxy" --config="$C/kube-proxy.yaml"
  # The cluster's DNS for Services (every kubelet's clusterDNS): on each of the sandbox's addresses
  # a node reaches it by, NODE_IP for this node's pods and VM_GATEWAY for the VM nodes' pods.
  local dns_listen=(--listen "$NODE_IP:53")
  [ "${VM_NODES:-0}" -eq 0 ] || dns_listen+=(--listen "$VM_GATEWAY:53")
  start dns /usr/bin/python3 "$SRC/test/cluster/dns.py" "${dns_listen[@]}" --server https://127.0.0.1:6443 \
    --ca "$P/ca.crt" --cert "$P/admin.crt" --key "$P/admin.key"
  # The VM nodes boot once the API server answers (their console is logs/erdma-vmN.log).
  for i in $(seq 1 "${VM_NODES:-0}"); do
    start "erdma-vm$i" qemu-system-x86_64 -machine q35,accel=tcg -cpu max -smp "$VM_SMP" -m "$VM_MEM" \
      -nographic -no-reboot -uuid "$(printf '00000000-0000-4000-8000-%012d' "$i")" \
      -kernel "$KERNEL" -initrd "$STATE/vm/initrd.cpio.gz" \
      -append "console=ttyS0 loglevel=4 panic=-1 stage2=$SRC/test/cluster/vm-node/guest.sh" \
      -netdev "tap,id=n0,ifname=vmtap$i,script=no,downscript=no" \
      -device "virtio-net-pci,netdev=n0,mac=52:54:00:ff:01:$(printf '%02x' "$i")" \
      -drive "file=$STATE/vm/erdma-vm$i/disk.img,format=raw,if=virtio,cache=unsafe" \
      -virtfs local,path=/,mount_tag=hostroot,security_model=none,readonly=on,multidevs=remap \
      -virtfs "local,path=$STATE/vm/erdma-vm$i,mount_tag=node,security_model=none,multidevs=remap"
  done
  wait_until kube-controller-manager 60 up_or_dead kube-controller-manager curl -sfk https://127.0.0.1:10257/healthz
  wait_until kube-scheduler 60 up_or_dead kube-scheduler curl -sfk https://127.0.0.1:10259/healthz
  wait_until kubelet 60 up_or_dead kubelet curl -sf http://127.0.0.1:10248/healthz
  date -u +%FT%TZ > "$STATE/sandbox.ready"
  log "components started"
  # Wait for TERM (stop_all); a component that exits stays down and shows in `status`.
  while :; do
    sleep 3600 &
    wait $! || true
  done
}

# --------------------------------------------------------------------------------------------
# On this machine

require_root() { [ "$(id -u)" -eq 0 ] || die "run as root (namespaces, mounts, cgroups)"; }

# Its discovery cache stays in the state directory (the default is ~/.kube/cache), so `down` takes it.
kubectl_() { KUBECACHEDIR=$STATE/kube-cache "$(cat "$STATE/bin")/kubectl" --kubeconfig "$STATE/admin.kubeconfig" "$@"; }
# The ctr of the running containerd (recorded by `up`), for use inside the sandbox's mounts.
# shellcheck disable=SC1091  # $STATE/env is written by `up` at run time
ctr_path() { (. "$STATE/env" 2>/dev/null && echo "${CTR:-/usr/bin/ctr}") || echo /usr/bin/ctr; }

# Sets CONTAINERD_MODE (debian, cdi or dir), CONTAINERD_BIN and CTR from ERDMA_CONTAINERD; builds
# containerd for `cdi`.
containerd_choice() {
  local want=${ERDMA_CONTAINERD:-debian}
  case $want in
    debian)
      CONTAINERD_MODE=debian CONTAINERD_BIN=/usr/bin CTR=/usr/bin/ctr ;;
    cdi)
      CONTAINERD_MODE=cdi
      CONTAINERD_BIN=$("$SRC/test/cluster/build-containerd.sh" | tail -n 1)
      [ -x "$CONTAINERD_BIN/containerd" ] || die "test/cluster/build-containerd.sh gave no containerd"
      CTR=$CONTAINERD_BIN/ctr ;;
    /*)
      CONTAINERD_MODE=dir CONTAINERD_BIN=${want%/} CTR=${want%/}/ctr
      local f version
      for f in containerd containerd-shim-runc-v2 ctr; do
        [ -x "$CONTAINERD_BIN/$f" ] || die "ERDMA_CONTAINERD=$want has no executable $f (a containerd 2.x bin directory is expected)"
      done
      version=$("$CONTAINERD_BIN/containerd" --version 2>&1) || true
      [[ $version =~ \ v?2\. ]] ||
        die "ERDMA_CONTAINERD=$want: '$version' is not containerd 2.x (its configuration here is version 3)" ;;
    *)
      die "ERDMA_CONTAINERD=$want: expected debian (the default, Debian's containerd 1.6), cdi (containerd 2.x with CDI, built by test/cluster/build-containerd.sh) or the absolute path of a directory with containerd 2.x's containerd, containerd-shim-runc-v2 and ctr" ;;
  esac
}

node_ready() {  # [NODE]
  [ "$(kubectl_ get node "${1:-$NODE}" -o jsonpath='{.status.conditions[?(@.type=="Ready")].status}' 2>/dev/null)" = True ]
}

cmd_up() {
  require_root
  VM_NODES=${ERDMA_VM_NODES:-0}
  while [ $# -gt 0 ]; do
    case $1 in
      --vm-nodes) [ $# -ge 2 ] || die "--vm-nodes needs a number"; VM_NODES=$2; shift 2 ;;
      --vm-nodes=*) VM_NODES=${1#*=}; shift ;;
      *) die "up: unknown argument '$1' (up [--vm-nodes N])" ;;
    esac
  done
  [[ $VM_NODES =~ ^[0-4]$ ]] || die "--vm-nodes $VM_NODES: a number from 0 to 4 (each VM takes ${ERDMA_VM_MEM:-2048} MiB and a share of the CPUs)"
  if sandbox_init > /dev/null; then
    local running running_vms
    # shellcheck disable=SC1091  # $STATE/env is written by `up` at run time
    running=$(. "$STATE/env" && echo "${CONTAINERD_WANT:-debian}")
    # shellcheck disable=SC1091  # $STATE/env is written by `up` at run time
    running_vms=$(. "$STATE/env" && echo "${VM_NODES:-0}")
    [ "$running" = "${ERDMA_CONTAINERD:-debian}" ] ||
      die "already up with ERDMA_CONTAINERD=$running, not ${ERDMA_CONTAINERD:-debian}: run scripts/cluster.sh down first"
    [ "$running_vms" = "$VM_NODES" ] ||
      die "already up with $running_vms VM nodes, not $VM_NODES: run scripts/cluster.sh down first"
    log "already up"
    echo "export KUBECONFIG=$STATE/admin.kubeconfig KUBECACHEDIR=$STATE/kube-cache PATH=$(cat "$STATE/bin"):\$PATH"
    return 0
  fi
  [ ! -e "$STATE" ] || { log "removing what a previous run left in $STATE"; cmd_down; }
  local missing=() need=() t
  [ "${ERDMA_CONTAINERD:-debian}" != debian ] || need=(/usr/bin/containerd /usr/bin/containerd-shim-runc-v2 /usr/bin/ctr)
  for t in "${need[@]}" /usr/lib/cni/bridge /usr/lib/cni/host-local /usr/lib/cni/loopback /usr/bin/python3; do
    [ -x "$t" ] || missing+=("$t")
  done
  local tools=(runc unshare nsenter openssl curl ip iptables-restore mountpoint gcc)
  [ "$VM_NODES" = 0 ] || tools+=(qemu-system-x86_64 busybox cpio rdma mkfs.ext4)
  for t in "${tools[@]}"; do
    command -v "$t" > /dev/null || missing+=("$t")
  done
  [ ${#missing[@]} -eq 0 ] || die "missing: ${missing[*]} (scripts/install-deps.sh installs them)"
  local t0=$SECONDS bin
  bin=$("$SRC/test/cluster/build-k8s.sh" | tail -n 1)
  [ -x "$bin/kubelet" ] || die "test/cluster/build-k8s.sh gave no binaries"
  containerd_choice
  BIN=$bin KERNEL=
  VM_SMP=${ERDMA_VM_SMP:-1} VM_MEM=${ERDMA_VM_MEM:-2048}
  if [ "$VM_NODES" != 0 ]; then
    KERNEL=$("$SRC/test/vm/build-kernel.sh" | tail -n 1)
    [ -f "$KERNEL" ] || die "test/vm/build-kernel.sh gave no kernel"
  fi
  local t1=$SECONDS
  mkdir -p "$STATE/logs"
  echo "$bin" > "$STATE/bin"
  # Sourced by the sandbox and by the commands here: one NAME=VALUE a line, shell-quoted.
  printf '%s=%q\n' BIN "$bin" CONTAINERD_WANT "${ERDMA_CONTAINERD:-debian}" CONTAINERD_MODE "$CONTAINERD_MODE" \
    CONTAINERD_BIN "$CONTAINERD_BIN" CTR "$CTR" VM_NODES "$VM_NODES" KERNEL "$KERNEL" VM_SMP "$VM_SMP" \
    VM_MEM "$VM_MEM" > "$STATE/env"
  pki
  configs
  "$SRC/images/build-images.sh" --out "$STATE/images" pause workload > "$STATE/logs/images.log" 2>&1 ||
    die "images/build-images.sh failed: $(tail -n 5 "$STATE/logs/images.log")"
  local i
  if [ "$VM_NODES" != 0 ]; then
    mkdir -p "$STATE/vm"
    "$SRC/test/vm/make-initramfs.sh" - - "$STATE/vm" || die "test/vm/make-initramfs.sh failed"
    for i in $(seq 1 "$VM_NODES"); do vm_node_config "$i"; done
  fi
  # The kubelet's cgroup root must exist in every hierarchy; a cpuset cgroup needs its CPUs and
  # memory nodes before a process can join it.
  local h
  for h in /sys/fs/cgroup/*/; do
    mountpoint -q "$h" || continue
    mkdir -p "$h$CGROUP_ROOT"
    if [ -f "${h}cpuset.cpus" ]; then
      cat "${h}cpuset.cpus" > "$h$CGROUP_ROOT/cpuset.cpus"
      cat "${h}cpuset.mems" > "$h$CGROUP_ROOT/cpuset.mems"
    fi
  done
  log "starting the node sandbox (logs in $STATE/logs)"
  setsid /usr/bin/python3 "$SRC/test/cluster/forward.py" listen "127.0.0.1:$PORT" -- \
    unshare --mount --propagation private --net --pid --fork --mount-proc --uts -- \
    /bin/bash "$SELF" _init "$STATE" > "$STATE/logs/sandbox.log" 2>&1 < /dev/null 3>&- &
  echo $! > "$STATE/sandbox.pid"
  started() {
    [ -e "$STATE/sandbox.ready" ] && return 0
    kill -0 "$(cat "$STATE/sandbox.pid")" 2>/dev/null || { log "the sandbox ended: $(tail -n 20 "$STATE/logs/sandbox.log")"; exit 1; }
    return 1
  }
  wait_until "the node sandbox's components" 300 started ||
    die "see $STATE/logs; scripts/cluster.sh down removes everything"
  wait_until "node $NODE Ready" 180 node_ready || {
    kubectl_ describe node "$NODE" >&2 || true
    die "see $STATE/logs/kubelet.log; scripts/cluster.sh down removes everything"
  }
  [ "$(kubectl_ get --raw /readyz)" = ok ] || die "kube-apiserver /readyz is not ok"
  # Under TCG a VM node takes minutes: ERDMA_VM_READY_SECONDS bounds the wait for each.
  for i in $(seq 1 "$VM_NODES"); do
    wait_until "node erdma-vm$i Ready" "${ERDMA_VM_READY_SECONDS:-900}" node_ready "erdma-vm$i" || {
      kubectl_ describe node "erdma-vm$i" >&2 || true
      tail -n 30 "$STATE/vm/erdma-vm$i/logs/guest.log" "$STATE/logs/erdma-vm$i.log" >&2 || true
      die "see $STATE/vm/erdma-vm$i/logs and $STATE/logs/erdma-vm$i.log; scripts/cluster.sh down removes everything"
    }
    log "node erdma-vm$i Ready $((SECONDS - t1)) s after the start"
  done
  # Pods can be created once their namespace has its service account.
  wait_until "the default service account" 60 kubectl_ -n default get serviceaccount default ||
    die "see $STATE/logs/kube-controller-manager.log; scripts/cluster.sh down removes everything"
  log "up in $((SECONDS - t0)) s (binaries $((t1 - t0)) s, start $((SECONDS - t1)) s)"
  kubectl_ get nodes -o wide >&2
  echo "export KUBECONFIG=$STATE/admin.kubeconfig KUBECACHEDIR=$STATE/kube-cache PATH=$bin:\$PATH"
}

cmd_status() {
  local init pid
  if ! init=$(sandbox_init); then
    echo "down${STATE:+ (no sandbox running for $STATE)}"
    [ ! -e "$STATE" ] || echo "leftovers in $STATE: run scripts/cluster.sh down"
    return 3
  fi
  local ns
  ns=$(readlink "/proc/$init/ns/pid")
  echo "sandbox: PID $init (host view), since $(cat "$STATE/sandbox.ready" 2>/dev/null || echo '(starting)')"
  # shellcheck disable=SC2010  # the PID entries of /proc are plain digits
  for pid in $(ls /proc | grep -E '^[0-9]+$' | sort -n); do
    [ "$(readlink "/proc/$pid/ns/pid" 2>/dev/null)" = "$ns" ] || continue
    case $(cat "/proc/$pid/comm" 2>/dev/null) in
      etcd|kube-*|kubelet|containerd|python3) printf '  %-8s %s\n' "$pid" "$(tr '\0' ' ' 2>/dev/null < "/proc/$pid/cmdline" | cut -c1-100)" ;;
    esac
  done
  echo "containerd: $(nsenter -t "$init" -m -- "$(ctr_path)" --address /run/containerd/containerd.sock version 2>/dev/null |
    sed -n '/^Server:/,$s/^ *Version: *//p')"
  echo "containers running: $(nsenter -t "$init" -m -- "$(ctr_path)" --address /run/containerd/containerd.sock -n k8s.io tasks ls -q 2>/dev/null | wc -l)"
  kubectl_ get nodes -o wide || true
  echo "export KUBECONFIG=$STATE/admin.kubeconfig KUBECACHEDIR=$STATE/kube-cache PATH=$(cat "$STATE/bin"):\$PATH"
}

cmd_restart() {
  require_root
  local init name=$1 end=$((SECONDS + 60))
  init=$(sandbox_init) || die "not up"
  # A VM node reboots as a node does: its services stop and its disk is synced before the power
  # goes (qemu ends on the signal, as a power cut would).
  if [[ $name == erdma-vm* ]] && [ -d "$STATE/vm/$name" ]; then
    vm_exec "$name" prepare_reboot || log "$name: the shutdown before the reboot failed; rebooting anyway"
  fi
  rm -f "$STATE/restart.done"
  echo "$name" > "$STATE/restart.request"
  kill -USR1 "$init"
  until [ -s "$STATE/restart.done" ]; do
    [ $SECONDS -lt $end ] || die "$name: no answer from the sandbox after 60 s"
    sleep 0.2
  done
  grep -q "^restarted " "$STATE/restart.done" || die "$(cat "$STATE/restart.done")"
  rm -f "$STATE/restart.request" "$STATE/restart.done"
  log "$name restarted"
}

cmd_exec() {
  require_root
  local init
  init=$(sandbox_init) || die "not up"
  if [ "$1" = --node ]; then
    [ $# -ge 3 ] || die "exec --node NODE CMD..."
    vm_exec "$2" "${@:3}"
    return
  fi
  exec nsenter -t "$init" -m -n -p -u -- "$@"
}

# vm_exec NODE CMD...: the guest (test/cluster/vm-node/guest.sh) runs each script dropped into
# its node directory's cmd/ and writes NAME.out and NAME.rc beside it.
vm_exec() {
  local node=$1 d id end rc
  shift
  d=$STATE/vm/$node/cmd
  [ -d "$STATE/vm/$node" ] || die "no VM node $node (up --vm-nodes N makes erdma-vm1..N)"
  mkdir -p "$d"
  id=$(date +%s%N)
  printf '%s\n' "$*" > "$d/.$id.sh" && mv "$d/.$id.sh" "$d/$id.sh"
  end=$((SECONDS + 120))
  until [ -e "$d/$id.rc" ]; do
    [ $SECONDS -lt $end ] || die "$node did not run the command within 120 s (is it up? $STATE/vm/$node/logs/guest.log)"
    sleep 0.2
  done
  cat "$d/$id.out"
  rc=$(cat "$d/$id.rc")
  rm -f "$d/$id.sh" "$d/$id.out" "$d/$id.rc"
  return "$rc"
}

cmd_import() {
  require_root
  local init f
  init=$(sandbox_init) || die "not up"
  local vms d base end
  # shellcheck disable=SC1091  # $STATE/env is written by `up` at run time
  vms=$(. "$STATE/env" && echo "${VM_NODES:-0}")
  for f in "$@"; do
    nsenter -t "$init" -m -- "$(ctr_path)" --address /run/containerd/containerd.sock -n k8s.io images import - < "$f"
    # Each VM node imports what lands in its import/ directory (test/cluster/vm-node/guest.sh).
    base=$(basename "$f")
    for d in $(seq 1 "$vms"); do
      d=$STATE/vm/erdma-vm$d/import
      rm -f "$d/$base" "$d/$base.done" "$d/$base.failed"
      cp "$f" "$d/.$base" && mv "$d/.$base" "$d/$base"
    done
    for d in $(seq 1 "$vms"); do
      d=$STATE/vm/erdma-vm$d/import
      end=$((SECONDS + 300))
      until [ -e "$d/$base.done" ] || [ -e "$d/$base.failed" ]; do
        [ $SECONDS -lt $end ] || die "$base: not imported on ${d%/import} within 300 s"
        sleep 0.5
      done
      [ -e "$d/$base.done" ] || die "$base: the import failed on ${d%/import}: $(cat "$d/$base.failed")"
    done
  done
}

# Kill what find_pids prints until it prints nothing, for 10 s at most.
kill_until_gone() {  # WHAT FIND-FUNCTION
  local n=0 pids
  while [ $n -lt 50 ]; do
    pids=$($2)
    [ -n "$pids" ] || return 0
    # shellcheck disable=SC2086
    kill -KILL $pids 2>/dev/null || true
    sleep 0.2
    n=$((n + 1))
  done
  log "still running after 10 s: $1 ($pids)"
  return 1
}

# Processes that name the state directory on their command line (the sandbox's unshare and init,
# anything started from it that escaped), and processes in the kubelet's cgroups.
leftover_pids() {
  local pid f
  # shellcheck disable=SC2010  # the PID entries of /proc are plain digits
  for pid in $(ls /proc | grep -E '^[0-9]+$'); do
    # shellcheck disable=SC2015  # skip this shell and its subshell
    [ "$pid" != $$ ] && [ "$pid" != "$BASHPID" ] || continue
    tr '\0' '\n' 2>/dev/null < "/proc/$pid/cmdline" | grep -qxF -- "$STATE" && echo "$pid"
  done
  for f in /sys/fs/cgroup/*/"$CGROUP_ROOT"; do
    [ -d "$f" ] && find "$f" -name cgroup.procs -exec cat {} + 2>/dev/null
  done
}

cmd_down() {
  require_root
  local pid init n=0
  # TERM to PID 1 of the sandbox: it stops the components; when it ends the kernel kills every
  # process left in its PID namespace (containers and shims included) and drops its mounts and
  # network namespace with it.
  if init=$(sandbox_init); then
    pid=$(cat "$STATE/sandbox.pid")
    log "stopping the node sandbox (PID $init)"
    kill -TERM "$init" 2>/dev/null || true
    while kill -0 "$pid" 2>/dev/null && [ $n -lt 150 ]; do sleep 0.2; n=$((n + 1)); done
    if kill -0 "$pid" 2>/dev/null; then
      log "the sandbox did not stop in 30 s after SIGTERM; killing it"
      kill -KILL "$init" 2>/dev/null || true
    fi
    grep -h 'stopped .* after' "$STATE/logs/sandbox.log" >&2 || true
  fi
  kill_until_gone "processes of $STATE" leftover_pids || true
  # The cgroups the kubelet and runc made, deepest first.
  local d
  for d in /sys/fs/cgroup/*/"$CGROUP_ROOT"; do
    [ -d "$d" ] || continue
    find "$d" -depth -type d -exec rmdir {} + 2>/dev/null || true
    [ ! -d "$d" ] || log "cannot remove cgroup $d"
  done
  if [ -e "$STATE" ]; then
    # Mounts here come only from the sandbox's own mount namespace; one seen from this namespace
    # is unexpected: unmount it, and never remove files across a mount.
    local m
    # shellcheck disable=SC2013  # mountinfo escapes blanks in paths (\040): one word per mount
    for m in $(awk -v s="$STATE" 'index($5, s) == 1 {print $5}' /proc/self/mountinfo | sort -r); do
      log "unmounting $m"
      umount -l "$m" || true
    done
    if awk -v s="$STATE" 'index($5, s) == 1 {found=1} END {exit !found}' /proc/self/mountinfo; then
      die "mounts remain under $STATE; not removing it"
    fi
    rm -rf --one-file-system "$STATE"
  fi
  log "down"
}

case ${1:-} in
  up) shift; cmd_up "$@" ;;
  down) cmd_down ;;
  status) cmd_status ;;
  import) shift; [ $# -gt 0 ] || die "import FILE.tar..."; cmd_import "$@" ;;
  exec) shift; [ $# -gt 0 ] || die "exec [--node NODE] CMD..."; cmd_exec "$@" ;;
  restart) [ $# -eq 2 ] || die "restart NAME"; cmd_restart "$2" ;;
  _init) [ "${2:-}" = "$STATE" ] || STATE=$2; sandbox_main ;;
  *) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//' >&2; exit 2 ;;
esac
