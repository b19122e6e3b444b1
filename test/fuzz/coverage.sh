#!/usr/bin/env bash
# Line coverage of the parsing code reached by the fuzz corpora: builds the replay programs with
# clang's source-based coverage, replays the seed corpus, the regressions and whatever corpus a
# fuzz run grew (build-fuzz/corpus/<target>/), and prints llvm-cov's per-file report for the
# files each target exists to exercise.
#
#   test/fuzz/coverage.sh [TARGET...]
set -euo pipefail
cd "$(dirname "$0")/../.."
here=test/fuzz
build=${COVERAGE_BUILD_DIR:-build-coverage}
grown=${FUZZ_BUILD_DIR:-build-fuzz}/corpus

timeout 1800 cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Debug \
  -DCMAKE_C_COMPILER=clang-14 -DCMAKE_CXX_COMPILER=clang++-14 -DERDMA_BUILD_BENCH=OFF -DERDMA_COVERAGE=ON >/dev/null

targets=("$@")
if [ ${#targets[@]} -eq 0 ]; then
  for d in "$here"/corpus/*/; do targets+=("$(basename "$d")"); done
fi
timeout 2400 cmake --build "$build" --parallel "${BUILD_JOBS:-$(nproc)}" --target "${targets[@]/#/replay_}"

# The sources each target is meant to cover (grep patterns over the repository's paths).
declare -A sources=(
  [review]='webhook/core/(admission|mutate|pod_view|quantity)\.cpp|common/text\.cpp'
  [config]='webhook/core/config\.cpp|common/structured\.cpp'
  [agent_config]='agent/core/config\.cpp|common/structured\.cpp'
  [rdma_netlink]='agent/sys/rdma_netlink\.cpp'
  [sysfs]='agent/sys/sysfs_rdma\.cpp'
  [smc_netlink]='agent/sys/smc_codec\.cpp'
  [pod_sources]='agent/sys/pod_sources\.cpp|agent/core/pod_setup\.cpp'
  [preload_env]='agent/preload/preload_logic\.c'
)
for t in "${targets[@]}"; do
  profraw="$build/cov-$t.profraw"
  inputs=("$here/corpus/$t" "$here/regressions/$t")
  [ -d "$grown/$t" ] && inputs+=("$grown/$t")
  LLVM_PROFILE_FILE="$profraw" timeout 1800 "$build/test/fuzz/replay_$t" "${inputs[@]}" >/dev/null
  llvm-profdata-14 merge -sparse "$profraw" -o "$build/cov-$t.profdata"
  pattern=${sources[$t]:-.}
  files=$(git ls-files | grep -E "^($pattern)$" || true)
  echo "==> $t ($(find "${inputs[@]}" -type f | wc -l) inputs)"
  # shellcheck disable=SC2086
  llvm-cov-14 report "$build/test/fuzz/replay_$t" -instr-profile="$build/cov-$t.profdata" $files |
    grep -vE '^-+$' | sed "s|$PWD/||"
done
