#!/usr/bin/env bash
# Builds chosen test programs with nvcc alone and runs them natively (line-buffered; a crash gets a
# backtrace from cuda-gdb): a quick check of a test program's expectations on a real GPU.
#   scripts/gpu-probes/native_diag.sh prog[:args] ...
cd "$(dirname "$0")/../.."
o=$(mktemp -d)
for spec in "$@"; do
  p=${spec%%:*}; args=""; [ "$spec" != "$p" ] && args=${spec#*:}
  nvcc -std=c++17 -arch=sm_90 -cudart shared -Itests/cuda -o "$o/$p" "tests/cuda/$p.cu" || continue
  echo "== $p $args"
  stdbuf -oL "$o/$p" $args; rc=$?
  echo "rc=$rc"
  if [ $rc -ge 128 ]; then
    timeout 120 cuda-gdb -batch -ex run -ex bt --args "$o/$p" $args 2>&1 | grep -E '^#|signal' | head -20
  fi
done
