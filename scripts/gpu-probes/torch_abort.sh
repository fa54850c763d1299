#!/usr/bin/env bash
# A PyTorch run through rgpu that aborts (heap corruption at exit): runs examples/torch_probe.py
# over TRANSPORT (tcp) under gdb with glibc's heap checks on and prints every thread's stack at the
# signal.
#   scripts/gpu-probes/torch_abort.sh [BUILD_DIR] [TRANSPORT] [SCRIPT...]
cd "$(dirname "$0")/../.."
b=${1:-build-gpu}
t=${2:-tcp}
shift 2 2>/dev/null
script=("${@:-examples/torch_probe.py}")
o=$(mktemp -d)
$b/server/rgpud --backend cuda --listen 127.0.0.1:0 --port-file $o/port 2>$o/rgpud.log &
d=$!
trap 'kill $d 2>/dev/null; wait $d 2>/dev/null' EXIT
for _ in $(seq 100); do [ -s $o/port ] && break; sleep 0.1; done
export RGPU_SERVERS=127.0.0.1:$(cat $o/port) RGPU_TRANSPORT=$t
dbg=$(command -v gdb || command -v cuda-gdb)  # the GPU machine has cuda-gdb only
for i in 1 2 3; do
  MALLOC_CHECK_=3 LD_LIBRARY_PATH=$PWD/$b/lib timeout 240 $dbg -q -batch \
    -ex 'handle SIGSEGV nostop noprint pass' -ex 'set pagination off' -ex run \
    -ex 'thread apply all bt 25' --args python3 "${script[@]}" >$o/gdb.$i 2>&1
  if grep -q "SIGABRT\|corrupted\|free()" $o/gdb.$i; then
    grep -E "^#|^Thread|signal|corrupted|free\(\)|rgpu:" $o/gdb.$i | grep -v "^#.* in ?? ()" | head -150
    exit 0
  fi
  echo "run $i: no abort ($(grep -c '^ok' $o/gdb.$i) ok lines)"
done
