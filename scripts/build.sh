#!/usr/bin/env bash
# Configures and builds rgpu into ${RGPU_BUILD_DIR:-build}.  Extra arguments go to cmake.
set -euo pipefail
cd "$(dirname "$0")/.."
build="${RGPU_BUILD_DIR:-build}"
cmake -S . -B "$build" -G Ninja -DRGPU_CUDA_ROOT="${RGPU_CUDA_ROOT:-/usr/local/cuda}" "$@" >/dev/null
ninja -C "$build"
