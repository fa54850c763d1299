#!/usr/bin/env bash
# Issue 30's probes on the GPU machine after scripts/gpu-e2e.sh built BUILD_DIR: the toolkit's
# cuBLAS without a workspace (toolkit_blas.cu) natively and through rgpu over shm and TCP, and
# the JAX probe (jax_probe.sh) with XLA's autotuner on and, over TCP, off.
#   scripts/gpu-probes/compat_run.sh [BUILD_DIR]
cd "$(dirname "$0")/../.."
b=${1:-build-gpu}
o=${OUT:-$(mktemp -d)}/compat
mkdir -p $o
source scripts/gpu-probes/one_rgpud.sh
/usr/local/cuda/bin/nvcc -O2 -arch=sm_90 -o $o/toolkit_blas scripts/gpu-probes/toolkit_blas.cu -lcublas || exit 1
echo "== toolkit cuBLAS, native"; $o/toolkit_blas
for t in shm tcp; do
  echo "== toolkit cuBLAS, rgpu $t"
  RGPU_TRANSPORT=$t LD_LIBRARY_PATH=$PWD/$b/lib $o/toolkit_blas 2>$o/blas.$t.err
  grep -E "^rgpu" $o/blas.$t.err | sort | uniq -c | head -5
done
echo "rgpud log lines naming sessions: $(grep -c session $o/rgpud.log)"
kill $d 2>/dev/null; wait $d 2>/dev/null; trap - EXIT
echo "== JAX"
OUT=$o/jax timeout 420 bash scripts/gpu-probes/jax_probe.sh $b 2>&1 | grep -vE "^ok " | tail -40
OUT=$o/jax0 XLA_FLAGS=--xla_gpu_autotune_level=0 timeout 300 bash scripts/gpu-probes/jax_probe.sh $b 2>&1 | grep -E "rc=|FAIL|sessions" | tail -10
