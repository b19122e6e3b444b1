#!/bin/sh
# PID 1 in the VM after switch_root onto the host's read-only root. Makes the few writable places
# a system needs, mounts the host's output directory, runs the scenario with its output in a file
# (never a pipe: a task stuck in D state would hold a pipe open forever), saves dmesg, powers off.
# Kernel command line: vmout=<host dir> scenario=<script> kdir=<unpacked kernel> kver=<version>.
# shellcheck disable=SC2013  # the kernel command line is one line of words
for arg in $(cat /proc/cmdline); do
  case "$arg" in
    vmout=*) VMOUT=${arg#vmout=} ;;
    scenario=*) SCENARIO=${arg#scenario=} ;;
    kdir=*) KDIR=${arg#kdir=} ;;
    kver=*) KVER=${arg#kver=} ;;
  esac
done
export VMOUT SCENARIO KDIR KVER
export PATH=/usr/sbin:/usr/bin:/sbin:/bin
for d in /run /var/tmp /root /var/run /var/lib/dhcp; do mount -t tmpfs tmpfs "$d" 2>/dev/null; done
# A tmpfs over /tmp would hide a checkout (and the output share) that lives under /tmp, such as a
# fresh clone in /tmp; then /tmp stays the host's read-only view and scratch space is on /run.
case "$VMOUT:$SCENARIO" in
  /tmp/* | *:/tmp/*) ;;
  *) mount -t tmpfs tmpfs /tmp 2>/dev/null ;;
esac
SCRATCH=/run/scratch
TMPDIR=$SCRATCH
export SCRATCH TMPDIR
mkdir -p /run/netns /var/run/netns "$SCRATCH"
mount -t tmpfs tmpfs /var/log 2>/dev/null
mount -t 9p -o trans=virtio,version=9p2000.L,msize=512000 vmout "$VMOUT" || echo "stage2: cannot mount $VMOUT"
echo "stage2: kernel $(uname -r), uptime $(cut -d' ' -f1 /proc/uptime) s" > "$VMOUT/stage2.log"
# Bounded by polling, not by waiting: a process stuck in D state cannot be killed or reaped, and
# power-off must still happen. The host kills qemu at its own deadline anyway.
limit=${SCENARIO_TIMEOUT:-420}
/bin/sh "$SCENARIO" > "$VMOUT/scenario.log" 2>&1 &
pid=$!
# Measured on the uptime clock: under TCG a "sleep 1" loop drifts far behind.
uptime_s() { cut -d. -f1 /proc/uptime; }
end=$(($(uptime_s) + limit))
while kill -0 "$pid" 2>/dev/null && [ "$(uptime_s)" -lt "$end" ]; do
  sleep 1
done
if kill -0 "$pid" 2>/dev/null; then
  echo "stage2: scenario still running after $limit s; powering off anyway" >> "$VMOUT/stage2.log"
else
  wait "$pid"
  echo "stage2: scenario exited with $? at uptime $(uptime_s) s" >> "$VMOUT/stage2.log"
fi
dmesg > "$VMOUT/dmesg.log" 2>&1
sync
echo o > /proc/sysrq-trigger
sleep 10
