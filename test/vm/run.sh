#!/usr/bin/env bash
# Real-kernel proof: boots Debian's bookworm-backports kernel under qemu (TCG, no KVM needed, no
# network: -nic none), with the host's root filesystem mounted read-only over virtio-9p, and runs
# scenario.sh in it: erdma-agent (devices, run with a fake kubelet and runtime, pnet, ueid,
# smc-status, smc-stats) on Soft-RoCE, and SMC-R between a python3 client and server that only use
# TCP, moved to SMC by the libsmc-preload.so the agent installed. Prints the guest's log and dmesg,
# then "N passed, M failed" as its last line;
# exits non-zero on any failure. Bounded: at most VM_DEADLINE seconds (default 600) in total,
# downloads included; qemu is killed at its deadline.
#
# Usage: test/vm/run.sh [BUILD_DIR]   (default: build; the needed targets are built if missing)
# Uses Debian's /usr/bin/python3 in the guest. Kernel cache: test/vm/.cache (git-ignored).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
src=$(cd "$here/../.." && pwd)
build=$(cd "$src" && realpath -m "${1:-build}")
start=$SECONDS
deadline=${VM_DEADLINE:-600}
left() { echo $((deadline - (SECONDS - start))); }
bounded() {  # SECONDS CMD...: run CMD with at most SECONDS and never past the overall deadline
  local secs=$1
  shift
  local l
  l=$(left)
  if [ "$l" -le 5 ]; then
    echo "vm: out of time before: $*" >&2
    return 124
  fi
  [ "$secs" -gt "$l" ] && secs=$l
  timeout -s KILL "$secs" "$@"
}
summary_fail() {
  echo "vm: $*" >&2
  echo "0 passed, 1 failed"
  exit 1
}

echo "==> vm: packages"
bounded 400 "$src/scripts/install-deps.sh" || summary_fail "installing packages failed"

echo "==> vm: build ($build)"
if [ ! -f "$build/build.ninja" ]; then
  bounded 300 cmake -S "$src" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo > /dev/null || summary_fail "cmake failed"
fi
bounded 900 cmake --build "$build" --target erdma-agent smc-preload agent_smc_kernel_test vm-netlink-recorder -- -j2 > /dev/null ||
  summary_fail "building the VM's programs failed"

echo "==> vm: kernel"
kinfo=$(bounded 400 "$here/fetch-kernel.sh") || summary_fail "fetching the kernel failed"
kdir=$(echo "$kinfo" | sed -n 's/.*KDIR=\([^ ]*\).*/\1/p')
kver=$(echo "$kinfo" | sed -n 's/.*KVER=\([^ ]*\).*/\1/p')
echo "    $kver in $kdir"

echo "==> vm: initramfs"
# Under the checkout: the guest sees it through the 9p root (stage2.sh leaves /tmp alone when the
# checkout is under /tmp, so a fresh clone there works too).
mkdir -p "$here/.cache"
work=$(mktemp -d "$here/.cache/run.XXXXXX")
trap 'rm -rf "$work"' EXIT
out=$work/out
mkdir -p "$out"
"$here/make-initramfs.sh" "$kdir" "$kver" "$work" || summary_fail "building the initramfs failed"

echo "==> vm: boot (qemu TCG, 2 vCPUs, 2 GiB, no network)"
qemu_secs=$(($(left) - 15))
[ "$qemu_secs" -gt 480 ] && qemu_secs=480
[ "$qemu_secs" -lt 60 ] && summary_fail "not enough time left to boot the VM"
vm_t0=$SECONDS
# A guest that dies before stage 2 starts (the kernel under TCG with two vCPUs has, rarely,
# oopsed at an int3 while patching its own code in early boot) is booted once more; anything
# after stage 2 started is the test's verdict and never retried.
for attempt in 1 2; do
  set +e
  timeout -s KILL "$qemu_secs" qemu-system-x86_64 -machine q35,accel=tcg -cpu max -smp 2 -m 2048 \
    -nographic -no-reboot -nic none \
    -kernel "$kdir/boot/vmlinuz-$kver" -initrd "$work/initrd.cpio.gz" \
    -append "console=ttyS0 loglevel=4 panic=-1 stage2=$here/stage2.sh vmout=$out scenario=$here/scenario.sh kdir=$kdir kver=$kver build=$build src=$src SCENARIO_TIMEOUT=$((qemu_secs - 40))" \
    -virtfs "local,path=/,mount_tag=hostroot,security_model=none,readonly=on,multidevs=remap" \
    -virtfs "local,path=$out,mount_tag=vmout,security_model=none,multidevs=remap" \
    < /dev/null > "$out/console.log" 2>&1
  qrc=$?
  set -e
  [ -f "$out/stage2.log" ] && break
  if [ "$attempt" = 1 ] && [ $((qemu_secs - (SECONDS - vm_t0))) -gt 120 ]; then
    echo "    the guest died before stage 2 (qemu exit $qrc); its console:"
    grep -E "panic|Oops|BUG" "$out/console.log" | head -5 | sed 's/^/      /' || true
    echo "    booting it once more"
    qemu_secs=$((qemu_secs - (SECONDS - vm_t0)))
    mv "$out/console.log" "$out/console-first-boot.log"
  else
    break
  fi
done
echo "    qemu exited with $qrc after $((SECONDS - vm_t0)) s"

echo "==> vm: guest log"
[ -f "$out/stage2.log" ] && sed 's/^/    /' "$out/stage2.log"
if [ -f "$out/scenario.log" ]; then
  cat "$out/scenario.log"
else
  echo "vm: the scenario wrote no log; console:"
  tail -50 "$out/console.log"
fi
echo "==> vm: kernel messages (smc, rxe, infiniband)"
if [ -f "$out/dmesg.log" ]; then
  grep -iE "smc|rxe|infiniband|rdma|9p|hung|BUG|Call Trace" "$out/dmesg.log" | tail -60 | sed 's/^/    /' || true
fi
mkdir -p "$here/.cache/last-run"
cp -f "$out"/*.log "$out"/*.txt "$here/.cache/last-run/" 2>/dev/null || true
[ -d "$out/recorded" ] && cp -rf "$out/recorded" "$here/.cache/last-run/"
[ -d "$out/sysfs-rxe" ] && rm -rf "$here/.cache/last-run/sysfs-rxe" && cp -rf "$out/sysfs-rxe" "$here/.cache/last-run/"
echo "==> vm: total $((SECONDS - start)) s (logs kept in test/vm/.cache/last-run)"

result=$(grep -E '^[0-9]+ passed, [0-9]+ failed$' "$out/scenario.log" 2>/dev/null | tail -1 || true)
if [ -z "$result" ]; then
  summary_fail "the scenario did not finish (qemu exit $qrc)"
fi
echo "$result"
case "$result" in
  *", 0 failed") exit 0 ;;
  *) exit 1 ;;
esac
