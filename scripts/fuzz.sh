#!/usr/bin/env bash
# Builds the fuzz targets (tests/fuzz) in their own build dir with clang, address and
# undefined-behaviour sanitizers, and runs each for SECONDS (default 20) from the checked-in seed
# corpus.  Fails on any crash, sanitizer report, leak or timeout; the crashing input is left in
# ${RGPU_FUZZ_DIR:-build-fuzz}/artifacts/.
#   scripts/fuzz.sh [SECONDS-PER-TARGET] [TARGET...]
# Environment: RGPU_FUZZ_DIR (build dir), RGPU_FUZZ_JOBS (targets run at once, default 2),
# CC/CXX (default clang-14/clang++-14, else clang/clang++).
set -euo pipefail
cd "$(dirname "$0")/.."
seconds="${1:-20}"
shift || true
targets=("$@")
((${#targets[@]})) || targets=(frame_header messages handshake fatbin cubin ptx)
build="${RGPU_FUZZ_DIR:-build-fuzz}"
jobs="${RGPU_FUZZ_JOBS:-2}"

cc="${CC:-}" cxx="${CXX:-}"
if [ -z "$cxx" ]; then
  if command -v clang++-14 >/dev/null; then cc=clang-14 cxx=clang++-14
  elif command -v clang++ >/dev/null; then cc=clang cxx=clang++
  else cc=gcc cxx=g++; echo "fuzz: no clang; building with g++ and rgpu's own driver" >&2
  fi
fi
cmake -S . -B "$build" -G Ninja -DCMAKE_C_COMPILER="$cc" -DCMAKE_CXX_COMPILER="$cxx" \
  -DCMAKE_BUILD_TYPE=RelWithDebInfo -DRGPU_FUZZ=AUTO -DRGPU_BUILD_TESTS=OFF \
  -DRGPU_BUILD_CUDA_PROGRAMS=OFF -DRGPU_CUDA_ROOT="${RGPU_CUDA_ROOT:-/usr/local/cuda}" >/dev/null
ninja -C "$build" -j "${RGPU_BUILD_JOBS:-2}" fuzz >/dev/null
engine=$(sed -n 's/^RGPU_HAVE_LIBFUZZER:INTERNAL=\(.*\)$/\1/p' "$build/CMakeCache.txt")
mkdir -p "$build/artifacts" "$build/logs"

export ASAN_OPTIONS="${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=1}"
export UBSAN_OPTIONS="${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}"
run_one() {
  local t="$1" log="$build/logs/$1.log" work="$build/work/$1"
  rm -rf "$work" && mkdir -p "$work"  # new inputs found in this run (the seeds stay untouched)
  local args=(-max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 -max_len=65536
              -artifact_prefix="$build/artifacts/$t-" -print_final_stats=1)
  [ "$t" = handshake ] && args+=(-max_len=16384)
  [ -f "tests/fuzz/$t.dict" ] && args+=(-dict="tests/fuzz/$t.dict")
  if [ "$engine" = 1 ]; then
    "$build/tests/fuzz/fuzz_$t" "${args[@]}" "$work" "tests/fuzz/corpus/$t" >"$log" 2>&1
  else
    local root="$PWD" bin
    bin="$(cd "$build" && pwd)/tests/fuzz/fuzz_$t"
    (cd "$build/artifacts" && "$bin" -max_total_time="$seconds" "$root/tests/fuzz/corpus/$t") \
      >"$log" 2>&1
  fi
}
status=0
pids=() names=()
for t in "${targets[@]}"; do
  run_one "$t" &
  pids+=($!) names+=("$t")
  if ((${#pids[@]} >= jobs)); then
    if wait "${pids[0]}"; then echo "fuzz: ${names[0]}: ok ($(grep -Eo 'stat::number_of_executed_units: *[0-9]+|[0-9]+ executions' "$build/logs/${names[0]}.log" | grep -Eo '[0-9]+' | head -1) executions)"
    else echo "fuzz: ${names[0]}: FAILED (see $build/logs/${names[0]}.log)"; tail -30 "$build/logs/${names[0]}.log"; status=1; fi
    pids=("${pids[@]:1}") names=("${names[@]:1}")
  fi
done
for i in "${!pids[@]}"; do
  if wait "${pids[$i]}"; then echo "fuzz: ${names[$i]}: ok ($(grep -Eo 'stat::number_of_executed_units: *[0-9]+|[0-9]+ executions' "$build/logs/${names[$i]}.log" | grep -Eo '[0-9]+' | head -1) executions)"
  else echo "fuzz: ${names[$i]}: FAILED (see $build/logs/${names[$i]}.log)"; tail -30 "$build/logs/${names[$i]}.log"; status=1; fi
done
exit $status
