#!/usr/bin/env bash
# The whole test suite: installs dependencies, builds, runs every test (unit and integration
# against a local rgpud --backend host).  Exits non-zero when a test fails.
#   1. a Release build (warnings are errors here: -O3 finds some that -O2 does not), every test;
#   2. a short run of every fuzz target (scripts/fuzz.sh; RGPU_FUZZ_SECONDS per target, default 20);
#   3. the suite again under address and undefined-behaviour sanitizers (RGPU_TEST_SANITIZE=0
#      skips), with the CUDA programs of step 1 (nvcc's output is not instrumented).
# About 45 minutes on a fresh 2-core machine, most of it compiling; timings per step are printed.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
build="${RGPU_BUILD_DIR:-build}"
start=$SECONDS
step() { echo "== $1 (at $((SECONDS - start)) s)"; }
step "Release build and every test"
RGPU_BUILD_DIR="$build" scripts/build.sh -DCMAKE_BUILD_TYPE=Release -DRGPU_BUILD_TESTS=ON \
  -DRGPU_WERROR=ON
(cd "$build" && ctest --output-on-failure -j "$(nproc)" --timeout 600)

step "fuzz targets, ${RGPU_FUZZ_SECONDS:-20} s each"
scripts/fuzz.sh "${RGPU_FUZZ_SECONDS:-20}"

if [ "${RGPU_TEST_SANITIZE:-1}" != 0 ]; then
  step "address + undefined sanitizers"
  RGPU_BUILD_DIR="$build-asan" scripts/build.sh -DRGPU_BUILD_TESTS=ON -DRGPU_SANITIZE=ON \
    -DRGPU_WERROR=ON -DCMAKE_BUILD_TYPE=Debug -DRGPU_CUDA_PROGRAMS_FROM="$PWD/$build"
  (cd "$build-asan" && ASAN_OPTIONS="${ASAN_OPTIONS:-detect_leaks=1}" \
    UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1" \
    ctest --output-on-failure -j "$(nproc)" --timeout 900)
fi
step "done"
