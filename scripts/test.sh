#!/usr/bin/env bash
# The whole test suite: installs dependencies, builds, runs every test (unit and integration
# against a local rgpud --backend host).  Exits non-zero when a test fails.
#   1. the normal build (warnings are errors here), every test;
#   2. a short run of every fuzz target (scripts/fuzz.sh; RGPU_FUZZ_SECONDS per target, default 20);
#   3. a Release build compiles (warnings are errors);
#   4. the suite again under address and undefined-behaviour sanitizers (RGPU_TEST_SANITIZE=0 skips).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
build="${RGPU_BUILD_DIR:-build}"
RGPU_BUILD_DIR="$build" scripts/build.sh -DRGPU_BUILD_TESTS=ON -DRGPU_WERROR=ON
(cd "$build" && ctest --output-on-failure -j "$(nproc)" --timeout 600)

echo "== fuzz targets, ${RGPU_FUZZ_SECONDS:-20} s each"
scripts/fuzz.sh "${RGPU_FUZZ_SECONDS:-20}"

echo "== Release build (warnings are errors)"
RGPU_BUILD_DIR="$build-release" scripts/build.sh -DCMAKE_BUILD_TYPE=Release -DRGPU_WERROR=ON \
  -DRGPU_BUILD_TESTS=OFF -DRGPU_BUILD_CUDA_PROGRAMS=OFF

if [ "${RGPU_TEST_SANITIZE:-1}" != 0 ]; then
  echo "== address + undefined sanitizers"
  RGPU_BUILD_DIR="$build-asan" scripts/build.sh -DRGPU_BUILD_TESTS=ON -DRGPU_SANITIZE=ON \
    -DRGPU_WERROR=ON -DCMAKE_BUILD_TYPE=Debug
  (cd "$build-asan" && ASAN_OPTIONS="${ASAN_OPTIONS:-detect_leaks=1}" \
    UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1" \
    ctest --output-on-failure -j "$(nproc)" --timeout 900)
fi
