#!/bin/busybox sh
# shellcheck shell=dash  # busybox ash; dash is the nearest dialect shellcheck knows
# /init of the VM's initramfs (busybox only): loads the virtio 9p modules, mounts the host's root
# read-only over 9p and hands over to stage2.sh on it. Kernel command line: stage2=<abs path>.
/bin/busybox --install -s /bin
mkdir -p /proc /sys /dev /newroot
mount -t proc proc /proc
mount -t sysfs sysfs /sys
mount -t devtmpfs devtmpfs /dev
# shellcheck disable=SC2013  # one module path a line, none with blanks
for m in $(cat /modules.order); do
  insmod "/lib/modules/$m" || echo "init: insmod $m failed"
done
stage2=""
# shellcheck disable=SC2013  # the kernel command line is one line of words
for arg in $(cat /proc/cmdline); do
  case "$arg" in stage2=*) stage2=${arg#stage2=} ;; esac
done
if ! mount -t 9p -o trans=virtio,version=9p2000.L,ro,msize=512000,cache=loose hostroot /newroot; then
  echo "init: cannot mount the host root over 9p"
  poweroff -f
fi
mount --move /proc /newroot/proc
mount --move /sys /newroot/sys
mount --move /dev /newroot/dev
exec switch_root /newroot /bin/sh "$stage2"
