#!/usr/bin/env bash
# Builds the kernel the VM worker nodes boot, from Debian's kernel source package at a pinned
# version, into a cache outside the repository:
#   ${ERDMA_KERNEL_CACHE:-/var/cache/erdma-controller}/kernel-<version>-<hash>/bzImage (and config)
# <hash> covers test/vm/kernel/node.config, the package's version and checksum, and gcc's version
# (test/cluster/go-build-lib.sh says how the directory is made and reused). The last line on
# stdout is the bzImage's path; progress, with each phase's time, goes to stderr.
#
#   test/vm/build-kernel.sh            build if needed, print the bzImage's path
#   test/vm/build-kernel.sh --print    print the path it would use, build nothing
#
# Why this kernel: SMC-R between pods needs an RDMA device inside each pod's network namespace.
# Soft-RoCE sends from a device's own namespace only since 7.x (rxe_ns.c); Debian's 6.12 kernels
# send from the initial namespace only, so SMC-R from a pod falls back there. Debian builds 7.3
# without SMC, which now depends on DIBS, so the package's config is not used: the config is
# `allnoconfig` + `kvm_guest.config` + node.config (everything built in), a few minutes' build.
# The source comes from trixie-backports through a private apt state (this machine's sources are
# not touched), at the mirror this machine's apt already uses; the .deb's SHA-256 is checked
# against the one pinned here. Compiles through ccache, so a config change rebuilds little.
#
# Needs: apt-get, dpkg-deb, xz-utils, gcc, make, flex, bison, bc, libelf-dev, ccache
# (scripts/install-deps.sh installs them). Times on 2 cores: test/cluster/README.md, "VM worker nodes".
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=../cluster/go-build-lib.sh
. "$HERE/../cluster/go-build-lib.sh"
GB_LOG=build-kernel

KERNEL_PACKAGE=linux-source-7.3
KERNEL_PACKAGE_VERSION=7.3.4-1~bpo13+1
KERNEL_PACKAGE_SHA256=703e369ddd4cce971452f5a593ee55df3a5c10c83caf0fa0df039633ed181ee3
KERNEL_SUITE=trixie-backports
FRAGMENT=$HERE/kernel/node.config

log() { gb_log "$@"; }
die() { gb_die "$@"; }

for t in apt-get dpkg-deb xz make gcc flex bison bc; do
  command -v "$t" > /dev/null || die "$t not found (scripts/install-deps.sh installs it)"
done
[ -e /usr/include/gelf.h ] || die "libelf-dev is missing (objtool needs it; scripts/install-deps.sh installs it)"

GB_NAME=kernel GB_VERSION=${KERNEL_PACKAGE_VERSION%%-*}
GB_CACHE=${ERDMA_KERNEL_CACHE:-/var/cache/erdma-controller}
GB_FILES=("$FRAGMENT")
GB_KEY="$KERNEL_PACKAGE $KERNEL_PACKAGE_VERSION $KERNEL_PACKAGE_SHA256 bzImage"
GB_TOOLCHAIN=$(gcc -dumpfullversion)
GB_TOOLCHAIN="gcc $GB_TOOLCHAIN"
GB_OUT=bzImage GB_DONE=bzImage
GB_INFO="$KERNEL_PACKAGE $KERNEL_PACKAGE_VERSION"

# The Debian mirror this machine's apt already uses (deb822 or one-line sources).
debian_mirror() {
  local m=""
  [ ! -f /etc/apt/sources.list.d/debian.sources ] ||
    m=$(awk '/^URIs:/ && $2 !~ /security/ {print $2; exit}' /etc/apt/sources.list.d/debian.sources)
  [ -n "$m" ] || [ ! -f /etc/apt/sources.list ] ||
    m=$(awk '$1 == "deb" && $3 !~ /security/ {print $2; exit}' /etc/apt/sources.list)
  [ -n "$m" ] || die "no Debian mirror in /etc/apt/sources.list or /etc/apt/sources.list.d/debian.sources"
  echo "$m"
}

gb_build() {
  local tmp=$1 t0=$SECONDS t apt=$1/apt src=$1/src
  mkdir -p "$apt/lists/partial" "$apt/archives/partial" "$src"
  echo "deb [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] $(debian_mirror) $KERNEL_SUITE main" > "$apt/sources.list"
  local opts=(-o "Dir::Etc::SourceList=$apt/sources.list" -o Dir::Etc::SourceParts=/dev/null
    -o "Dir::State::Lists=$apt/lists" -o "Dir::Cache=$apt" -o "Dir::Cache::archives=$apt/archives"
    -o APT::Get::List-Cleanup=0 -o APT::Sandbox::User=root)
  log "fetching $KERNEL_PACKAGE $KERNEL_PACKAGE_VERSION from $KERNEL_SUITE"
  timeout 180 apt-get "${opts[@]}" -qq update >&2 || die "apt-get update for $KERNEL_SUITE failed"
  (cd "$apt/archives" && timeout 600 apt-get "${opts[@]}" -qq download "$KERNEL_PACKAGE=$KERNEL_PACKAGE_VERSION" >&2) ||
    die "apt-get download $KERNEL_PACKAGE=$KERNEL_PACKAGE_VERSION failed (is the version still served by $KERNEL_SUITE?)"
  local deb sum
  deb=$(ls "$apt/archives/${KERNEL_PACKAGE}_"*.deb)
  sum=$(sha256sum "$deb" | cut -d' ' -f1)
  [ "$sum" = "$KERNEL_PACKAGE_SHA256" ] || die "$deb: SHA-256 $sum, expected $KERNEL_PACKAGE_SHA256"
  log "fetched $(du -h "$deb" | cut -f1) in $((SECONDS - t0)) s; unpacking"
  t=$SECONDS
  dpkg-deb --fsys-tarfile "$deb" | tar -xO "./usr/src/$KERNEL_PACKAGE.tar.xz" | xz -dc -T2 | tar -x -C "$src" --strip-components=1
  rm -rf "$apt"
  [ -f "$src/Makefile" ] || die "the package held no kernel tree"
  log "unpacked in $((SECONDS - t)) s: $(make -s -C "$src" kernelversion)"

  t=$SECONDS
  local mk=(make -s -C "$src" CC="ccache gcc" HOSTCC="ccache gcc" KBUILD_BUILD_USER=erdma KBUILD_BUILD_HOST=erdma-test)
  "${mk[@]}" allnoconfig > /dev/null
  "${mk[@]}" kvm_guest.config > /dev/null
  (cd "$src" && scripts/kconfig/merge_config.sh -m .config "$FRAGMENT" > "$tmp/merge.log") || die "merge_config.sh failed: $(tail -n 5 "$tmp/merge.log")"
  "${mk[@]}" olddefconfig > /dev/null
  # Every option node.config sets to y must have survived olddefconfig (an unmet dependency drops
  # it silently).
  local missing
  missing=$(grep -E '^CONFIG_[A-Z0-9_]+=y$' "$FRAGMENT" | while read -r want; do
    grep -qxF "$want" "$src/.config" || echo "${want%=y}"
  done)
  # shellcheck disable=SC2086,SC2116  # echo joins the list of names onto one line
  [ -z "$missing" ] || die "node.config asks for these, but the final .config lacks them (a dependency is missing): $(echo $missing)"
  log "configured in $((SECONDS - t)) s ($(grep -c '=y$' "$src/.config") options built in); building bzImage"
  t=$SECONDS
  "${mk[@]}" -j"$(nproc)" bzImage > "$tmp/build.log" 2>&1 || die "the kernel build failed: $(tail -n 20 "$tmp/build.log")"
  cp "$src/arch/x86/boot/bzImage" "$tmp/bzImage"
  cp "$src/.config" "$tmp/config"
  log "bzImage built in $((SECONDS - t)) s ($(du -h "$tmp/bzImage" | cut -f1))"
  rm -rf "$src" "$tmp/merge.log" "$tmp/build.log"
}
go_build_cached "$@"
