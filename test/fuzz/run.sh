#!/usr/bin/env bash
# Builds every fuzz target with clang, libFuzzer, ASan and UBSan, and runs each for SECONDS
# (default 60). Fails on any crash, leak, timeout or sanitizer report; the input that caused it is
# saved under test/fuzz/crashes/<target>/ (move it to test/fuzz/regressions/<target>/ with the fix).
#
#   test/fuzz/run.sh [SECONDS] [TARGET...]      e.g. test/fuzz/run.sh 600 review
#
# New inputs found while fuzzing go to build-fuzz/corpus/<target>/ (not into the repository).
set -euo pipefail
cd "$(dirname "$0")/../.."
seconds=${1:-60}
shift || true
here=test/fuzz
build=${FUZZ_BUILD_DIR:-build-fuzz}

timeout 1800 cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DCMAKE_C_COMPILER=clang-14 -DCMAKE_CXX_COMPILER=clang++-14 \
  -DSANITIZE=address,undefined -DERDMA_FUZZ=ON -DERDMA_BUILD_BENCH=OFF >/dev/null

targets=("$@")
if [ ${#targets[@]} -eq 0 ]; then
  targets=()
  for d in "$here"/corpus/*/; do targets+=("$(basename "$d")"); done
fi
timeout 2400 cmake --build "$build" --target "${targets[@]/#/fuzz_}"

export ASAN_OPTIONS=detect_leaks=1:abort_on_error=1:symbolize=1
export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
failed=0
for t in "${targets[@]}"; do
  work="$build/corpus/$t"
  crashes="$here/crashes/$t"
  mkdir -p "$work" "$crashes"
  dict=()
  [ -f "$here/$t.dict" ] && dict=(-dict="$here/$t.dict")
  echo "==> fuzz $t for ${seconds}s"
  log="$build/fuzz-$t.log"
  # The seed corpus is read, never written; new coverage lands in $work.
  if timeout $((seconds + 120)) "$build/test/fuzz/fuzz_$t" "$work" "$here/corpus/$t" "$here/regressions/$t" \
      "${dict[@]}" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 -max_len=65536 \
      -print_final_stats=1 -artifact_prefix="$crashes/" >"$log" 2>&1; then
    execs=$(grep -oE 'stat::number_of_executed_units: *[0-9]+' "$log" | grep -oE '[0-9]+$' || echo '?')
    cov=$(grep -oE 'cov: [0-9]+' "$log" | tail -n 1 || true)
    echo "<== fuzz $t: ok, $execs executions, $cov"
  else
    failed=1
    echo "<== fuzz $t: FAILED (log: $log; inputs: $crashes/)"
    tail -n 40 "$log"
  fi
done
rmdir "$here"/crashes/* 2>/dev/null || true
rmdir "$here"/crashes 2>/dev/null || true
exit $failed
