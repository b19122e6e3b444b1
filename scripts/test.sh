#!/usr/bin/env bash
# Runs every test erdma-controller has, from a fresh clone on Debian 12 (as root):
# installs the Debian packages, builds with -Werror, runs every ctest suite.
# Each stage is bounded in time; the whole run stays well inside CI's budget.
set -euo pipefail
cd "$(dirname "$0")/.."

stage() {
  local name=$1
  shift
  echo "==> $name"
  local t0=$SECONDS
  "$@"
  echo "<== $name: ok ($((SECONDS - t0)) s)"
}

stage "install packages" scripts/install-deps.sh
stage "build" scripts/build.sh build -DWERROR=ON
stage "unit and integration tests" timeout 1500 ctest --test-dir build --output-on-failure -j2 --timeout 600
# Real kernel (Debian's bookworm-backports kernel under qemu): SMC pnet/UEID netlink and SMC-R over
# Soft-RoCE through the preload library. Bounded inside (600 s, kernel download included) and here.
stage "VM test (SMC-R over Soft-RoCE, real kernel)" timeout 660 test/vm/run.sh build
echo "all tests passed"
