#!/usr/bin/env bash
# Where JAX fails on rgpu (over shm): a JAX script ($PY, default jax_small.py) natively, with XLA's
# autotuner off, and with XLA's verbose autotuner log (all skipped with GDB_ONLY=1); then under gdb
# with cu_errors.py: every failing call into rgpu's libcuda.so.1, its arguments and its caller.
#   [PY=script] [GDB_ONLY=1] [RGPU_TRACE_PREFIXES=cuMem,...] jax_diag.sh [BUILD_DIR]
cd "$(dirname "$0")/../.."
b=${1:-build-gpu}
o=${OUT:-$(mktemp -d)}; mkdir -p $o
source scripts/gpu-probes/one_rgpud.sh
export RGPU_TRANSPORT=shm
py=${PY:-scripts/gpu-probes/jax_small.py}
if [ -z "$GDB_ONLY" ]; then
echo "== native"; timeout 100 python3 $py 2>$o/native.err
echo "== rgpu, autotune 0"; XLA_FLAGS=--xla_gpu_autotune_level=0 LD_LIBRARY_PATH=$PWD/$b/lib timeout 100 python3 $py 2>$o/at0.err
grep -E "rgpu|rror" $o/at0.err | sort | uniq -c | head
echo "== rgpu, verbose"
TF_CPP_MIN_LOG_LEVEL=0 TF_CPP_VMODULE=autotuner=3,gpu_profiler=3,redzone_allocator=3,gpu_timer=3 \
  LD_LIBRARY_PATH=$PWD/$b/lib timeout 100 python3 $py >$o/verbose.out 2>$o/verbose.err
cat $o/verbose.out; grep -iE "fail|error|redzone|rgpu" $o/verbose.err | cut -c1-300 | sort | uniq -c | sort -rn | head -40
fi
echo "== gdb: driver calls that fail"
dbg=$(command -v gdb || command -v cuda-gdb)
RGPU_CU_LIB=$PWD/$b/lib/libcuda.so.1 RGPU_LOG=info LD_LIBRARY_PATH=$PWD/$b/lib timeout 400 $dbg -q -batch \
  -ex 'set pagination off' -ex 'set breakpoint pending on' -ex 'handle SIGSEGV nostop noprint pass' \
  -ex 'set confirm off' -ex "source scripts/gpu-probes/cu_errors.py" -ex run --args python3 $py >$o/gdb.out 2>&1
echo "gdb rc=$?"
grep -E "^CUERR|^   #|^ALLOC|rgpu: (warn|err)" $o/gdb.out | head -300
