#!/usr/bin/env bash
# Installs the Debian packages erdma-controller needs, for one purpose:
#   scripts/install-deps.sh                   build, test and demo (the default)
#   scripts/install-deps.sh build             only what compiling the shipped programs needs
#                                             (the build stage of images/*/Dockerfile)
#   scripts/install-deps.sh runtime-webhook   what the erdma-webhook image runs with
#   scripts/install-deps.sh runtime-agent     what the erdma-agent image runs with
#   scripts/install-deps.sh --print PURPOSE   print that list, one package a line, install nothing
# This is the only package list in the repository. Run as root on Debian 12 (bookworm).
# Re-running is cheap: apt is only called when something on the list is missing.
set -euo pipefail

# Compiling the programs.
build_packages=(
  # toolchain (binutils: objdump/readelf/nm inspect the preload library)
  g++ cmake ninja-build ccache pkg-config git ca-certificates binutils
  # webhook: request path, config, CLI
  libsimdjson-dev nlohmann-json3-dev libyaml-dev
  # webhook server
  libboost1.81-dev libssl-dev openssl
  # agent: kubelet device plugin (gRPC), RDMA discovery (libibverbs, RDMA netlink via libnl),
  # SMC-R (SMC_PNETID / SMC_GEN_NETLINK / sock_diag over libnl-genl)
  libgrpc++-dev protobuf-compiler-grpc libprotobuf-dev protobuf-compiler
  libibverbs-dev libnl-3-dev libnl-route-3-dev libnl-genl-3-dev
)

# Testing and the demo, on top of the build.
test_packages=(
  doctest-dev
  # lint: shellcheck on every shell script (test/lint/shellcheck.sh); the C++ layout
  # (scripts/format.sh), which needs clang-format 14 exactly
  shellcheck clang-format-14
  # test drivers (curl, openssl s_client, Debian's python3 at /usr/bin/python3, its Prometheus
  # text parser for the /metrics checks and its YAML parser for the manifest and certs checks)
  curl python3 python3-prometheus-client python3-yaml
  # server benchmark (bench/server/run.sh): HTTPS load generator
  wrk
  # agent tests: Soft-RoCE userspace, and an independently written kubelet in Python (Debian's
  # grpcio at /usr/bin/python3; its messages are compiled by protoc, its method paths by hand)
  rdma-core ibverbs-providers python3-grpcio python3-protobuf
  # sanitizer and fuzz builds (test/fuzz/run.sh): clang, libFuzzer, the sanitizer runtimes;
  # llvm-profdata and llvm-cov for test/fuzz/coverage.sh
  clang-14 libfuzzer-14-dev libclang-rt-14-dev llvm-14
  # netns tests use ip; the preload library's portability test runs a program linked with musl
  iproute2 musl-tools
  # VM test (test/vm/run.sh): qemu (TCG), busybox initramfs, kernel modules, Soft-RoCE tools
  qemu-system-x86 busybox-static kmod cpio xz-utils ibverbs-utils
  # the real clusters (scripts/cluster.sh), the VM worker nodes included: a container runtime
  containerd runc containernetworking-plugins
  # the VM worker nodes' kernel, built from Debian's source package (test/vm/build-kernel.sh)
  flex bison bc libelf-dev
  # monitoring (test/monitoring): promtool checks and unit-tests the alert rules, and a real
  # Prometheus 2.42 scrapes both programs on loopback. Only the binaries are used: no daemon is
  # left running or enabled (see below)
  prometheus
)
# kubectl on PATH, for the scripts and a person at the shell. Debian's is kubernetes-client
# (kubectl 1.20), whose kustomize cannot render the overlays (they need kubectl 1.21 or newer):
# the manifest and chart tests then use the pinned kubectl test/cluster/build-k8s.sh builds. A
# kubectl installed from elsewhere also owns /usr/bin/kubectl and conflicts with Debian's, so
# Debian's is only added when no kubectl is on PATH.
if ! command -v kubectl >/dev/null 2>&1; then
  test_packages+=(kubernetes-client)
fi

# The images' runtime stages: the shared libraries the shipped binaries load (test/images checks
# every one against ldd), plus what they load at run time.
runtime_webhook_packages=(
  libc6 libgcc-s1 libstdc++6 libssl3 libsimdjson14 libyaml-0-2
)
runtime_agent_packages=(
  libc6 libgcc-s1 libstdc++6 libssl3 libyaml-0-2 zlib1g
  libgrpc++1.51 libgrpc29 libprotobuf32 libabsl20220623 libc-ares2 libre2-9
  libibverbs1 libnl-3-200 libnl-route-3-200 libnl-genl-3-200
  # libibverbs loads its device drivers (erdma among them) from here at run time
  ibverbs-providers
  # modprobe (and the libraries it loads), for driver.loadModules (off by default)
  kmod libzstd1 liblzma5
)

print=0
if [ "${1:-}" = "--print" ]; then
  print=1
  shift
fi
purpose=${1:-all}
case $purpose in
  all) packages=("${build_packages[@]}" "${test_packages[@]}") ;;
  build) packages=("${build_packages[@]}") ;;
  runtime-webhook) packages=("${runtime_webhook_packages[@]}") ;;
  runtime-agent) packages=("${runtime_agent_packages[@]}") ;;
  *)
    echo "install-deps: unknown purpose \"$purpose\" (all, build, runtime-webhook, runtime-agent)" >&2
    exit 2
    ;;
esac
if [ "$print" -eq 1 ]; then
  printf '%s\n' "${packages[@]}"
  exit 0
fi

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}\n' "$p" 2>/dev/null | grep -q '^install ok installed$' || missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then
  echo "install-deps: all ${#packages[@]} packages present ($purpose)"
  exit 0
fi
if [ "$(id -u)" -ne 0 ]; then
  echo "install-deps: missing packages (${missing[*]}); run as root or install them yourself" >&2
  exit 1
fi
echo "install-deps: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
# Packages that ship a service (prometheus, containerd) must not start one on this machine: the
# tests run their own instances on loopback ports with temporary data. invoke-rc.d and
# deb-systemd-invoke ask policy-rc.d; exit 101 means "do not start". One already there (as in
# container images) is left as it is; ours is removed when the install ends.
policy=/usr/sbin/policy-rc.d
own_policy=0
if [ ! -e "$policy" ]; then
  printf '#!/bin/sh\n# scripts/install-deps.sh: no service starts while it installs packages.\nexit 101\n' >"$policy"
  chmod 755 "$policy"
  own_policy=1
fi
# shellcheck disable=SC2317  # run by the EXIT trap below
done_installing() {
  [ "$own_policy" -eq 1 ] && rm -f "$policy"
  # A package installed here does not start at boot either (prometheus would otherwise open
  # port 9090 and write /var/lib/prometheus on every boot of this machine).
  local p
  for p in "${missing[@]}"; do
    if [ "$p" = prometheus ] && command -v systemctl >/dev/null 2>&1; then
      systemctl disable prometheus.service >/dev/null 2>&1 || true
    fi
  done
}
trap done_installing EXIT
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
