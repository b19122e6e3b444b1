#!/usr/bin/env bash
# Runs every test erdma-controller has, from a fresh clone on Debian 12 (as root):
#   1. installs the Debian packages (scripts/install-deps.sh);
#   2. builds with -Werror and runs every ctest suite (unit, integration, interop, manifests);
#   3. builds again with clang, AddressSanitizer and UndefinedBehaviorSanitizer and runs the suites
#      that exercise C++ (unit, fuzz-input replay, the servers under hostile clients) there;
#   4. runs every libFuzzer target for a short, fixed time (test/fuzz/run.sh);
# Each stage is bounded in time; the whole run stays well inside CI's 45-minute budget.
# FUZZ_SECONDS (default 20) sets the time per fuzz target.
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

# The sanitizer tree doubles as the fuzz tree. -O0 with line tables only keeps its build short;
# fuzz runs here are brief checks, longer campaigns use test/fuzz/run.sh's optimized default.
sanitize=(-DCMAKE_C_COMPILER=clang-14 -DCMAKE_CXX_COMPILER=clang++-14 -DSANITIZE=address,undefined
  -DERDMA_FUZZ=ON -DERDMA_BUILD_BENCH=OFF -DCMAKE_CXX_FLAGS_DEBUG=-g1 -DCMAKE_C_FLAGS_DEBUG=-g1)
export ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
stage "sanitizer build (clang, ASan+UBSan)" env BUILD_TYPE=Debug scripts/build.sh build-sanitize "${sanitize[@]}"
stage "tests under ASan+UBSan" timeout 1200 ctest --test-dir build-sanitize --output-on-failure -j2 --timeout 600 \
  -LE 'deploy|interop|needs-'
stage "fuzz (${FUZZ_SECONDS:-20} s per target)" env FUZZ_BUILD_DIR=build-sanitize FUZZ_BUILD_TYPE=Debug \
  test/fuzz/run.sh "${FUZZ_SECONDS:-20}"
echo "all tests passed"
