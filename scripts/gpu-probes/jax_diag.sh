#!/usr/bin/env bash
# Where JAX fails on rgpu: the small JAX script with XLA's autotuner off, then under cuda-gdb with
# a breakpoint on the client's refused memset (stack of its caller).   jax_diag.sh [BUILD_DIR]
cd "$(dirname "$0")/../.."
b=${1:-build-gpu}
o=${OUT:-$(mktemp -d)}
RGPU_LOG=info $b/server/rgpud --backend cuda --listen 127.0.0.1:0 --port-file $o/port 2>$o/rgpud.log &
d=$!
trap 'kill $d 2>/dev/null; wait $d 2>/dev/null' EXIT
for _ in $(seq 100); do [ -s $o/port ] && break; sleep 0.1; done
export RGPU_SERVERS=127.0.0.1:$(cat $o/port) RGPU_TRANSPORT=shm
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
