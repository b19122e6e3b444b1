#!/usr/bin/env bash
# Installs every Debian package erdma-controller needs to build, test and demo.
# This is the only package list in the repository. Run as root on Debian 12 (bookworm).
# Re-running is cheap: apt is only called when something on the list is missing.
set -euo pipefail

packages=(
  # toolchain (binutils: objdump/readelf/nm inspect the preload library)
  g++ cmake ninja-build ccache pkg-config git ca-certificates binutils
  # webhook: request path, config, CLI, tests
  libsimdjson-dev nlohmann-json3-dev libyaml-dev doctest-dev
  # webhook server
  libboost1.81-dev libssl-dev openssl
  # test drivers (curl, openssl s_client, Debian's python3 at /usr/bin/python3 and its
  # Prometheus text parser for the /metrics check)
  curl python3 python3-prometheus-client
  # server benchmark (bench/server/run.sh): HTTPS load generator
  wrk
  # agent: kubelet device plugin (gRPC), RDMA discovery (libibverbs, RDMA netlink via libnl),
  # SMC-R (SMC_PNETID / SMC_GEN_NETLINK / sock_diag over libnl-genl); netns tests use ip
  libgrpc++-dev protobuf-compiler-grpc libprotobuf-dev protobuf-compiler
  libibverbs-dev rdma-core ibverbs-providers libnl-3-dev libnl-route-3-dev libnl-genl-3-dev iproute2
  # agent tests: an independently written kubelet in Python (Debian's grpcio at /usr/bin/python3;
  # its messages are compiled by protoc above, its method paths written by hand)
  python3-grpcio python3-protobuf
  # preload library portability test: a program linked against musl
  musl-tools
  # VM test (test/vm/run.sh): qemu (TCG), busybox initramfs, kernel modules, Soft-RoCE tools
  qemu-system-x86 busybox-static kmod cpio xz-utils ibverbs-utils
)

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}\n' "$p" 2>/dev/null | grep -q '^install ok installed$' || missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then
  echo "install-deps: all ${#packages[@]} packages present"
  exit 0
fi
if [ "$(id -u)" -ne 0 ]; then
  echo "install-deps: missing packages (${missing[*]}); run as root or install them yourself" >&2
  exit 1
fi
echo "install-deps: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
# A bounded retry: mirrors occasionally fail one request.
for attempt in 1 2 3; do
  if timeout 600 apt-get update -qq && timeout 1200 apt-get install -y -qq --no-install-recommends "${missing[@]}"; then
    exit 0
  fi
  echo "install-deps: apt failed (attempt $attempt), retrying" >&2
  sleep 5
done
echo "install-deps: could not install ${missing[*]}" >&2
exit 1
