#!/usr/bin/env bash
# Builds every fuzz target with clang, libFuzzer, ASan and UBSan, and runs each for SECONDS
# (default 60). Fails on any crash, leak, timeout or sanitizer report; the input that caused it is
# saved under test/fuzz/crashes/<target>/ (move it to test/fuzz/regressions/<target>/ with the fix).
#
#   test/fuzz/run.sh [SECONDS] [TARGET...]      e.g. test/fuzz/run.sh 600 review
#
# New inputs found while fuzzing go to build-fuzz/corpus/<target>/ (not into the repository).
# The review target also runs on large inputs afterwards (FUZZ_LARGE_SECONDS, below).
# FUZZ_BUILD_DIR (default build-fuzz) and FUZZ_BUILD_TYPE (default RelWithDebInfo) choose the
# tree; scripts/test.sh shares its sanitizer tree this way. FUZZ_RUNS=N also ends a target after N
# executions (whichever of SECONDS and N comes first).
set -euo pipefail
cd "$(dirname "$0")/../.."
seconds=${1:-60}
shift || true
here=test/fuzz
build=${FUZZ_BUILD_DIR:-build-fuzz}

timeout 1800 cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE="${FUZZ_BUILD_TYPE:-RelWithDebInfo}" \
  -DCMAKE_C_COMPILER=clang-14 -DCMAKE_CXX_COMPILER=clang++-14 \
  -DSANITIZE=address,undefined -DERDMA_FUZZ=ON -DERDMA_BUILD_BENCH=OFF >/dev/null

targets=("$@")
if [ ${#targets[@]} -eq 0 ]; then
  targets=()
  for d in "$here"/corpus/*/; do targets+=("$(basename "$d")"); done
fi
timeout 2400 cmake --build "$build" --parallel "${BUILD_JOBS:-$(nproc)}" --target "${targets[@]/#/fuzz_}"

export ASAN_OPTIONS=detect_leaks=1:abort_on_error=1:symbolize=1
export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
failed=0
for t in "${targets[@]}"; do
  work="$build/corpus/$t"
  crashes="$here/crashes/$t"
  mkdir -p "$work" "$crashes"
  extra=()
  [ -f "$here/$t.dict" ] && extra+=(-dict="$here/$t.dict")
  [ -n "${FUZZ_RUNS:-}" ] && extra+=(-runs="$FUZZ_RUNS")
  echo "==> fuzz $t for ${seconds}s"
  log="$build/fuzz-$t.log"
  t0=$SECONDS
  # The seed corpus is read, never written; new coverage lands in $work.
  if timeout $((seconds + 120)) "$build/test/fuzz/fuzz_$t" "$work" "$here/corpus/$t" "$here/regressions/$t" \
      "${extra[@]}" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 -max_len=65536 \
      -print_final_stats=1 -artifact_prefix="$crashes/" >"$log" 2>&1; then
    execs=$(grep -oE 'stat::number_of_executed_units: *[0-9]+' "$log" | grep -oE '[0-9]+$' || echo '?')
    cov=$(grep -oE 'cov: [0-9]+' "$log" | tail -n 1 || true)
    echo "<== fuzz $t: ok, $execs executions in $((SECONDS - t0)) s, $cov"
  else
    failed=1
    echo "<== fuzz $t: FAILED (log: $log; inputs: $crashes/)"
    tail -n 40 "$log"
  fi
done
# The review target once more, on the largest bodies a tenant can send (test/fuzz/large_seeds.py):
# inputs up to the apiserver's 3 MiB request limit, and a per-input timeout that only work linear
# in the input meets (the quadratic loops these seeds once hit took minutes). Linear is not fast
# in the sanitizer tree (-O0, ASan): the 4096-container seed's review, patch check and second
# review take 7.6 s there on the 2-core machine (0.1 s in a release build), hence 25 s.
# FUZZ_LARGE_SECONDS (default 10; 0 skips it) sets its time.
large_seconds=${FUZZ_LARGE_SECONDS:-10}
if [[ " ${targets[*]} " == *" review "* ]] && [ "$large_seconds" -gt 0 ]; then
  work="$build/corpus-large/review"
  crashes="$here/crashes/review"
  rm -rf "$work"
  mkdir -p "$work" "$crashes"
  python3 "$here/large_seeds.py" "$work"
  echo "==> fuzz review with large inputs (up to 3 MiB, 25 s per input) for ${large_seconds}s"
  log="$build/fuzz-review-large.log"
  t0=$SECONDS
  if timeout $((large_seconds + 180)) "$build/test/fuzz/fuzz_review" "$work" -dict="$here/review.dict" \
      -max_total_time="$large_seconds" -timeout=25 -rss_limit_mb=4096 -max_len=3145728 -len_control=0 \
      -print_final_stats=1 -artifact_prefix="$crashes/" >"$log" 2>&1; then
    execs=$(grep -oE 'stat::number_of_executed_units: *[0-9]+' "$log" | grep -oE '[0-9]+$' || echo '?')
    echo "<== fuzz review with large inputs: ok, $execs executions in $((SECONDS - t0)) s"
  else
    failed=1
    echo "<== fuzz review with large inputs: FAILED (log: $log; inputs: $crashes/)"
    tail -n 40 "$log"
  fi
fi
# Only this run's empty crash directories go (another run may be writing to its own).
for t in "${targets[@]}"; do rmdir "$here/crashes/$t" 2>/dev/null || true; done
rmdir "$here/crashes" 2>/dev/null || true
exit $failed
