#!/usr/bin/env bash
# Gathers what a build on the GPU machine needs but its image lacks (it has no package registry):
# libsodium's headers and static library, from this machine's libsodium-dev, into .deps/sodium.
# The device tool carries .deps (git-ignored) to the GPU machine.
set -euo pipefail
cd "$(dirname "$0")/.."
dpkg -s libsodium-dev >/dev/null 2>&1 || scripts/setup.sh
rm -rf .deps/sodium
mkdir -p .deps/sodium/include .deps/sodium/lib
cp -r /usr/include/sodium.h /usr/include/sodium .deps/sodium/include/
cp "$(dpkg -L libsodium-dev | grep '/libsodium\.a$')" .deps/sodium/lib/
echo "gpu-deps: $(du -sh .deps | cut -f1) in .deps"
