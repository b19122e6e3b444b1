#!/usr/bin/env bash
# Builds the busybox initramfs both VM tests boot: busybox, init.sh as /init, and the modules the
# 9p root needs before switch_root (virtio_pci, 9pnet_virtio, 9p with their dependencies, in load
# order in modules.order, .ko.xz unpacked since busybox insmod wants plain .ko; the initramfs has no
# kmod, so the order is resolved here, one module per modprobe call: further names would be taken
# as module parameters).
#   make-initramfs.sh KDIR KVER WORKDIR     writes WORKDIR/initrd/ and WORKDIR/initrd.cpio.gz
#   make-initramfs.sh - - WORKDIR           the same without modules, for a kernel with everything
#                                           built in (test/vm/build-kernel.sh)
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
kdir=$1 kver=$2 work=$3
mkdir -p "$work/initrd/bin" "$work/initrd/lib/modules"
cp /bin/busybox "$work/initrd/bin/busybox"
cp "$here/init.sh" "$work/initrd/init"
chmod +x "$work/initrd/init"
: > "$work/initrd/modules.order"
for line in $([ "$kdir" = - ] || for m in virtio_pci 9pnet_virtio 9p; do modprobe -d "$kdir" -S "$kver" --show-depends "$m"; done |
              awk '$1 == "insmod" {print $2}'); do
  name=$(basename "$line" .xz)
  grep -qx "$name" "$work/initrd/modules.order" && continue
  case "$line" in
    *.xz) xz -dc "$line" > "$work/initrd/lib/modules/$name" ;;
    *) cp "$line" "$work/initrd/lib/modules/$name" ;;
  esac
  echo "$name" >> "$work/initrd/modules.order"
done
(cd "$work/initrd" && find . | cpio -o -H newc --quiet | gzip -1 > "$work/initrd.cpio.gz")
