#!/usr/bin/env bash
# Installs what rgpu needs to build and test, with apt-get (Debian/Ubuntu).  The CUDA 13 toolkit
# (nvcc and headers, under /usr/local/cuda or $RGPU_CUDA_ROOT) must already be there; a GPU and its
# driver are optional (without them rgpud runs its host backend).
set -euo pipefail

packages=(cmake ninja-build g++ pkg-config libgtest-dev libsodium-dev libzstd-dev liblz4-dev libssl-dev
  openssl clang-14 libclang-rt-14-dev  # clang and its libFuzzer/sanitizer runtimes: scripts/fuzz.sh
  python3 binutils)  # tools/check_stubs.py (nm) checks docs/compatibility.md against the library
missing=()
for p in "${packages[@]}"; do
  dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p")
done
if ((${#missing[@]})); then
  echo "setup: installing ${missing[*]}"
  SUDO=""
  [ "$(id -u)" -eq 0 ] || SUDO="sudo"
  export DEBIAN_FRONTEND=noninteractive
  $SUDO apt-get update -qq
  $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

cuda_root="${RGPU_CUDA_ROOT:-/usr/local/cuda}"
if [ ! -x "$cuda_root/bin/nvcc" ] || [ ! -f "$cuda_root/include/cuda_runtime_api.h" ]; then
  echo "setup: the CUDA 13 toolkit was not found under $cuda_root (set RGPU_CUDA_ROOT)" >&2
  exit 1
fi
echo "setup: ok ($("$cuda_root/bin/nvcc" --version | tail -1))"
