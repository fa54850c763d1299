#!/usr/bin/env bash
# The whole test suite: installs dependencies, builds, runs every test (unit and integration
# against a local rgpud --backend host).  Exits non-zero when a test fails.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
scripts/build.sh -DRGPU_BUILD_TESTS=ON
cd "${RGPU_BUILD_DIR:-build}"
ctest --output-on-failure -j "$(nproc)" --timeout 600
