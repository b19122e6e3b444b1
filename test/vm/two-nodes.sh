#!/usr/bin/env bash
# Two-node real-runtime test: boots two qemu VMs at the same time, each a Kubernetes node stand-in
# on Debian's bookworm-backports kernel (test/vm/fetch-kernel.sh), the busybox initramfs and the
# host root read-only over virtio-9p (test/vm/init.sh, test/vm/stage2.sh, as test/vm/run.sh).
# The two NICs share one L2 link (qemu -netdev socket on a free loopback port); node IPs
# 10.77.0.1/24 and 10.77.0.2/24, Soft-RoCE rxe0 on eth0. Each node runs Debian's containerd (CRI
# plugin), runc and the CNI plugins, the product's images (images/build-images.sh) and the
# kubelet stand-in test/node/kubelet.py; test/vm/two-nodes/node.sh is the scenario each node runs
# (role 1 or 2), the nodes meeting at barriers in a shared writable 9p directory.
#
# Usage: test/vm/two-nodes.sh [BUILD_DIR]   (default: build; it must hold erdma-agent,
#        erdma-webhook and libsmc-preload.so, e.g. from scripts/build.sh)
# Environment: TWO_NODES_DEADLINE (seconds, default 1500) bounds the whole run; TWO_NODES_ACCEL=kvm
# tries KVM instead of TCG (see test/vm/two-nodes/FINDINGS.md: it does not boot on nested KVM);
# TWO_NODES_LATENCY_PODS=N (default 0, at most 100) adds a latency run: N more SMC-R pods started
# one after another, split between the nodes, with PreStartContainer's p50/p99 and the agent's
# per-step times in the summary (give it TWO_NODES_DEADLINE to match: seconds per pod under TCG).
# Needs: qemu-system-x86, busybox-static, kmod, cpio, containerd, runc, containernetworking-plugins,
# kubectl, /usr/bin/python3 with python3-yaml (scripts/install-deps.sh installs them all).
# Output: each node's checks (PASS:/FAIL:), a summary block, and "N passed, M failed" as the last
# line; exit status 0 only when nothing failed. A machine that cannot run the VMs FAILS, with the
# reason. Logs stay in test/vm/.cache/two-nodes-last/ (git-ignored).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
src=$(cd "$here/../.." && pwd)
build=$(cd "$src" && realpath -m "${1:-build}")
start=$SECONDS
deadline=${TWO_NODES_DEADLINE:-1500}
latency_pods=${TWO_NODES_LATENCY_PODS:-0}
case "$latency_pods" in
  '' | *[!0-9]*) echo "two-nodes: TWO_NODES_LATENCY_PODS must be a number of pods (0-100), not \"$latency_pods\"" >&2; exit 2 ;;
esac
[ "$latency_pods" -le 100 ] || { echo "two-nodes: TWO_NODES_LATENCY_PODS=$latency_pods: at most 100 (each node has 64 eRDMA slots, and the other phases use some)" >&2; exit 2; }
PY=/usr/bin/python3
host_passed=0
host_failed=0

left() { echo $((deadline - (SECONDS - start))); }
bounded() {  # SECONDS CMD...: CMD with at most SECONDS, never past the overall deadline
  local secs=$1 l
  shift
  l=$(left)
  if [ "$l" -le 5 ]; then
    echo "two-nodes: out of time before: $*" >&2
    return 124
  fi
  [ "$secs" -gt "$l" ] && secs=$l
  timeout -s KILL "$secs" "$@"
}
step() {  # NAME: starts a timed step
  step_name=$1
  step_t0=$SECONDS
  echo "==> two-nodes: $1"
}
step_done() { echo "    ($step_name: $((SECONDS - step_t0)) s)"; }
summary_fail() {
  echo "two-nodes: FAIL: $*" >&2
  echo "FAIL: $*"
  echo "$host_passed passed, $((host_failed + 1)) failed"
  exit 1
}
host_check() {  # DESCRIPTION CMD...
  local d=$1
  shift
  if "$@"; then
    host_passed=$((host_passed + 1))
    echo "PASS: host: $d"
  else
    host_failed=$((host_failed + 1))
    echo "FAIL: host: $d"
  fi
}

# --- what the machine must have --------------------------------------------------------------------
step "prerequisites"
missing=()
for tool in qemu-system-x86_64 busybox modprobe cpio gzip kubectl containerd runc ctr timeout; do
  command -v "$tool" > /dev/null || missing+=("$tool")
done
[ -x /usr/lib/cni/bridge ] && [ -x /usr/lib/cni/ipvlan ] && [ -x /usr/lib/cni/host-local ] || missing+=("/usr/lib/cni/{bridge,ipvlan,host-local}")
"$PY" -c 'import yaml' 2> /dev/null || missing+=("python3-yaml for $PY")
if [ ${#missing[@]} -gt 0 ]; then
  summary_fail "missing ${missing[*]}; run scripts/install-deps.sh (as root) to install the test packages"
fi
for f in agent/erdma-agent webhook/erdma-webhook agent/preload/libsmc-preload.so; do
  [ -e "$build/$f" ] || summary_fail "$build/$f not found; build it first: scripts/build.sh $build (or pass the build directory as the first argument)"
done
# TCG needs no /dev/kvm; a VM can still not run when qemu cannot start at all.
qemu-system-x86_64 -machine help 2>&1 | grep -q '^q35' ||
  summary_fail "qemu-system-x86_64 cannot emulate a q35 machine here: $(qemu-system-x86_64 -version 2>&1 | head -1)"
step_done

step "kernel"
kinfo=$(bounded 400 "$here/fetch-kernel.sh") || summary_fail "fetching the kernel failed (test/vm/fetch-kernel.sh; it needs Debian's bookworm-backports from the system's mirror)"
kdir=$(echo "$kinfo" | sed -n 's/.*KDIR=\([^ ]*\).*/\1/p')
kver=$(echo "$kinfo" | sed -n 's/.*KVER=\([^ ]*\).*/\1/p')
echo "    $kver in $kdir"
step_done

# Everything the guests read lives under the checkout: they see it through the 9p root.
mkdir -p "$here/.cache"
work=$(mktemp -d "$here/.cache/two-nodes.XXXXXX")
qpids=()
cleanup() {
  local p f
  # qemu itself (its pid file) and the timeout around it: killing timeout leaves its child running
  for f in "$work"/node*/qemu.pid; do
    [ -s "$f" ] && kill -KILL "$(cat "$f")" 2> /dev/null || true
  done
  for p in "${qpids[@]}"; do kill -KILL "$p" 2> /dev/null || true; done
  for p in "${qpids[@]}"; do wait "$p" 2> /dev/null || true; done
  rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

step "initramfs"
"$here/make-initramfs.sh" "$kdir" "$kver" "$work" || summary_fail "building the initramfs failed"
step_done

step "images (images/build-images.sh)"
mkdir -p "$work/images"
# Uncompressed layers: gunzip under TCG was most of the import time in the VMs.
if bounded 300 env ERDMA_IMAGE_LAYER=tar "$src/images/build-images.sh" --build-dir "$build" --out "$work/images" > "$work/images.log" 2>&1; then
  sed 's/^/    /' "$work/images.log" | tail -5
else
  sed 's/^/    /' "$work/images.log" | tail -20
  summary_fail "images/build-images.sh failed"
fi
step_done

step "manifests: kubectl kustomize manifests/default, erdma-webhook mutate"
if ! bounded 120 "$PY" "$here/two-nodes/prepare.py" --src "$src" --build "$build" --out "$work/pods" > "$work/prepare.log" 2>&1; then
  sed 's/^/    /' "$work/prepare.log"
  summary_fail "preparing the manifests failed (test/vm/two-nodes/prepare.py)"
fi
sed 's/^/    /' "$work/prepare.log"
step_done

# --- accelerator -------------------------------------------------------------------------------------
# On this kind of machine /dev/kvm exists, but it is nested KVM that must emulate ordinary
# instructions and fails ("emulation failure") in early boot for every CPU model, both the
# compressed kernel and a PVH boot of the uncompressed one (FINDINGS.md). So TCG is the default.
accel=tcg
cpu=max
why="TCG: /dev/kvm here is nested KVM that fails in early boot with every CPU model tried (test/vm/two-nodes/FINDINGS.md); set TWO_NODES_ACCEL=kvm to try it"
if [ "${TWO_NODES_ACCEL:-}" = kvm ]; then
  accel=kvm
  cpu=${TWO_NODES_CPU:-host,-arch-capabilities}
  why="KVM as asked by TWO_NODES_ACCEL=kvm (-cpu $cpu)"
fi
[ -e /dev/kvm ] || why="TCG: no /dev/kvm on this machine"
smp=${TWO_NODES_SMP:-1}
mem=${TWO_NODES_MEM:-2048}
echo "==> two-nodes: accel $accel, -cpu $cpu, -smp $smp, -m $mem per VM ($why)"

# A free loopback port for the link: bind port 0, read it, release it (qemu binds it at once).
port=$("$PY" -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
shared=$work/shared
mkdir -p "$shared" "$work/node1" "$work/node2"
qemu_secs=$(($(left) - 30))
[ "$qemu_secs" -lt 120 ] && summary_fail "not enough time left to boot the VMs ($(left) s)"
boot_vm() {  # ROLE NETDEV-OPTION
  local role=$1 net=$2 out=$work/node$1
  timeout -s KILL "$qemu_secs" qemu-system-x86_64 -machine "q35,accel=$accel" -cpu "$cpu" -smp "$smp" -m "$mem" \
    -nographic -no-reboot -pidfile "$out/qemu.pid" \
    -netdev "socket,id=n0,$net" -device "virtio-net-pci,netdev=n0,mac=52:54:00:77:00:0$role" \
    -kernel "$kdir/boot/vmlinuz-$kver" -initrd "$work/initrd.cpio.gz" \
    -append "console=ttyS0 loglevel=4 panic=-1 stage2=$here/stage2.sh vmout=$out scenario=$here/two-nodes/node.sh kdir=$kdir kver=$kver build=$build src=$src role=$role shared=$shared pods=$work/pods images=$work/images SCENARIO_TIMEOUT=$((qemu_secs - 40)) LATENCY_PODS=$latency_pods" \
    -virtfs "local,path=/,mount_tag=hostroot,security_model=none,readonly=on,multidevs=remap" \
    -virtfs "local,path=$out,mount_tag=vmout,security_model=none,multidevs=remap" \
    -virtfs "local,path=$shared,mount_tag=shared,security_model=none,multidevs=remap" \
    < /dev/null > "$out/console.log" 2>&1 &
  qpids+=($!)
}

step "boot two VMs (link on 127.0.0.1:$port)"
t_boot=$(date +%s%N)
boot_vm 1 "listen=127.0.0.1:$port"
# node 2 connects once node 1's qemu listens
for _ in $(seq 100); do
  ss -ltn "sport = :$port" 2> /dev/null | grep -q LISTEN && break
  sleep 0.1
done
boot_vm 2 "connect=127.0.0.1:$port"
declare -A stage2_at=()
while :; do
  running=0
  for r in 1 2; do
    kill -0 "${qpids[$((r - 1))]}" 2> /dev/null && running=$((running + 1))
    if [ -z "${stage2_at[$r]:-}" ] && [ -s "$work/node$r/stage2.log" ]; then
      ms=$((($(date +%s%N) - t_boot) / 1000000))
      stage2_at[$r]=$((ms / 1000)).$(printf '%03d' $((ms % 1000)))
      echo "    node $r: stage 2 after ${stage2_at[$r]} s ($(head -1 "$work/node$r/stage2.log"))"
    fi
  done
  [ "$running" = 0 ] && break
  sleep 0.2
done
qrc=()
for r in 1 2; do
  rc=0
  wait "${qpids[$((r - 1))]}" || rc=$?
  qrc+=("$rc")
done
qpids=()
echo "    qemu exited with ${qrc[0]} (node 1), ${qrc[1]} (node 2)"
step_done

last=$here/.cache/two-nodes-last
rm -rf "$last"
mkdir -p "$last"
for r in 1 2; do
  out=$work/node$r
  echo "==> two-nodes: node $r"
  [ -f "$out/stage2.log" ] && sed 's/^/    /' "$out/stage2.log"
  if [ -f "$out/scenario.log" ]; then
    sed "s/^/[node$r] /" "$out/scenario.log"
  else
    echo "    node $r wrote no scenario log; console:"
    tail -40 "$out/console.log" | sed 's/^/    /'
  fi
  if [ -f "$out/dmesg.log" ]; then
    echo "    kernel messages (smc, rxe, errors):"
    grep -iE "smc:|rxe|BUG|Call Trace|hung|Out of memory" "$out/dmesg.log" | tail -25 | sed 's/^/    /' || true
  fi
  mkdir -p "$last/node$r"
  cp -rf "$out"/. "$last/node$r/" 2> /dev/null || true
done
cp -rf "$shared" "$last/shared" 2> /dev/null || true
cp -f "$work"/*.log "$last/" 2> /dev/null || true
cp -rf "$work/pods" "$last/pods" 2> /dev/null || true

# --- summary ---------------------------------------------------------------------------------------------
passed=$host_passed
failed=$host_failed
# Counted from the checks' own lines, so a node that ran out of time still reports what it did.
for r in 1 2; do
  log=$work/node$r/scenario.log
  p=$(grep -c '^\[[0-9.]*\] PASS: ' "$log" 2> /dev/null || true)
  f=$(grep -c '^\[[0-9.]*\] FAIL: ' "$log" 2> /dev/null || true)
  passed=$((passed + ${p:-0}))
  failed=$((failed + ${f:-0}))
  if ! grep -qE '^[0-9]+ passed, [0-9]+ failed$' "$log" 2> /dev/null; then
    echo "FAIL: node $r: the scenario did not finish (qemu exit ${qrc[$((r - 1))]}; $(tail -1 "$work/node$r/stage2.log" 2> /dev/null); console in $last/node$r/console.log)"
    failed=$((failed + 1))
  fi
done
echo "==> two-nodes: summary"
echo "    accel: $accel, -cpu $cpu ($why)"
echo "    VM boot (qemu start -> stage 2): node 1 ${stage2_at[1]:-never} s, node 2 ${stage2_at[2]:-never} s (node 2 starts ~0.1-1 s later)"
cat "$work"/node1/results.txt "$work"/node2/results.txt 2> /dev/null | sed 's/^/    /' || true
echo "    total: $((SECONDS - start)) s (logs in test/vm/.cache/two-nodes-last)"
echo "$passed passed, $failed failed"
[ "$failed" = 0 ]
