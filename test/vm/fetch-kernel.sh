#!/usr/bin/env bash
# Fetches Debian's bookworm-backports kernel image into test/vm/.cache without installing it:
# a private apt state dir (the system's apt sources stay untouched), `apt-get download`, then
# `dpkg-deb -x` and `depmod -b`. Prints the unpacked kernel directory and version on stdout as
# "KDIR=... KVER=...". Re-runs reuse a completely unpacked kernel and touch nothing else.
set -euo pipefail
cd "$(dirname "$0")"
cache=$PWD/.cache
mkdir -p "$cache"

if [ -f "$cache/kernel.env" ]; then
  # shellcheck disable=SC1091
  . "$cache/kernel.env"
  # shellcheck disable=SC2153  # KDIR comes from kernel.env
  if [ -f "$KDIR/.unpacked" ]; then
    echo "KDIR=$KDIR KVER=$KVER"
    exit 0
  fi
fi

# The Debian mirror this machine already uses (deb822 or one-line format).
mirror=""
if [ -f /etc/apt/sources.list.d/debian.sources ]; then
  mirror=$(awk '/^URIs:/ {print $2; exit}' /etc/apt/sources.list.d/debian.sources)
fi
if [ -z "$mirror" ] && [ -f /etc/apt/sources.list ]; then
  mirror=$(awk '$1 == "deb" && $3 ~ /^bookworm/ {print $2; exit}' /etc/apt/sources.list)
fi
mirror=${mirror:-http://deb.debian.org/debian}

apt_dir=$cache/apt
mkdir -p "$apt_dir/lists/partial" "$apt_dir/archives/partial"
echo "deb [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] $mirror ${KSUITE:-bookworm-backports} main" \
  > "$apt_dir/sources.list"
opts=(-o "Dir::Etc::SourceList=$apt_dir/sources.list" -o Dir::Etc::SourceParts=/dev/null
      -o "Dir::State::Lists=$apt_dir/lists" -o "Dir::Cache=$apt_dir" -o "Dir::Cache::archives=$apt_dir/archives"
      -o APT::Get::List-Cleanup=0 -o APT::Sandbox::User=root)
timeout 180 apt-get "${opts[@]}" -qq update >&2
pkg=$(apt-cache "${opts[@]}" depends linux-image-amd64 | awk '$1 == "Depends:" && $2 ~ /^linux-image-[0-9]/ {print $2; exit}')
if [ -z "$pkg" ]; then
  echo "fetch-kernel: cannot find the kernel package linux-image-amd64 points to in ${KSUITE:-bookworm-backports}" >&2
  exit 1
fi
ver=${pkg#linux-image-}
(cd "$apt_dir/archives" && timeout 300 apt-get "${opts[@]}" -qq download "$pkg" >&2)
# shellcheck disable=SC2012  # a Debian package file name has no blanks
deb=$(ls "$apt_dir/archives/${pkg}"_*.deb | head -1)
kdir=$cache/kernel-$ver
rm -rf "$kdir"
timeout 120 dpkg-deb -x "$deb" "$kdir"
timeout 120 depmod -b "$kdir" "$ver"
touch "$kdir/.unpacked"
rm -f "$deb"  # the unpacked tree is what is kept
printf 'KDIR=%s\nKVER=%s\n' "$kdir" "$ver" > "$cache/kernel.env"
echo "KDIR=$kdir KVER=$ver"
