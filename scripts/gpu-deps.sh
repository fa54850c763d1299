#!/usr/bin/env bash
# Gathers what a build on the GPU machine needs but its image may lack (it has no package
# registry): the headers and static libraries of libsodium, zstd and lz4, from this machine's
# Debian -dev packages, into .deps/{include,lib}.  The device tool carries .deps (git-ignored).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh >/dev/null
rm -rf .deps
mkdir -p .deps/include .deps/lib
cp -r /usr/include/sodium.h /usr/include/sodium /usr/include/zstd.h /usr/include/zstd_errors.h \
  /usr/include/lz4.h /usr/include/lz4frame.h /usr/include/lz4hc.h .deps/include/
# OpenSSL: headers only (libssl.so.3 is loaded at run time when TLS is used); the arch-specific
# configuration headers go into the same folder.
cp -r /usr/include/openssl .deps/include/
cp -r /usr/include/x86_64-linux-gnu/openssl/. .deps/include/openssl/ 2>/dev/null || true
for pkg in libsodium-dev libzstd-dev liblz4-dev; do
  cp "$(dpkg -L "$pkg" | grep '\.a$' | head -1)" .deps/lib/
done
echo "gpu-deps: $(du -sh .deps | cut -f1) in .deps"
