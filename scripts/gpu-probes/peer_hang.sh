#!/usr/bin/env bash
# tests/cuda/peer_copies through three rgpuds (GPU 0, GPU 1, GPU 0) with stdout line-buffered;
# if it is still running after LIMIT seconds, every thread's stack of the client and of each
# rgpud process goes to $OUT/stacks.txt (cuda-gdb, in parallel), then all are killed.
#   scripts/gpu-probes/peer_hang.sh [BUILD_DIR] [TRANSPORT] [LIMIT]
cd "$(dirname "$0")/../.."
b=${1:-build-gpu} t=${2:-tcp} limit=${3:-100}
o=${OUT:-/tmp}
d=()
rm -f /tmp/ph-a.port /tmp/ph-b.port /tmp/ph-c.port
for n in a:0 b:1 c:0; do
  $b/server/rgpud --backend cuda --gpus ${n#*:} --listen 127.0.0.1:0 --port-file /tmp/ph-${n%:*}.port \
    2>$o/rgpud-${n%:*}.log &
  d+=($!)
done
for n in a b c; do for _ in $(seq 100); do [ -s /tmp/ph-$n.port ] && break; sleep 0.1; done; done
P() { echo 127.0.0.1:$(cat /tmp/ph-$1.port); }
RGPU_TRANSPORT=$t RGPU_SERVERS=$(P a),$(P b),$(P c) CUDA_VISIBLE_DEVICES=-1 LD_LIBRARY_PATH=$PWD/$b/lib \
  stdbuf -oL $b/cuda/peer_copies >$o/peer.out 2>$o/peer.err &
c=$!
for ((i = 0; i < limit * 10; i++)); do kill -0 $c 2>/dev/null || break; sleep 0.1; done
if kill -0 $c 2>/dev/null; then
  echo "HUNG after $limit s"
  g=()
  for p in $c $(for x in ${d[*]}; do echo $x; pgrep -P $x; done); do
    (echo "=== pid $p: $(tr '\0' ' ' </proc/$p/cmdline | cut -c1-80)"
     timeout 45 cuda-gdb -batch -p $p -ex 'thread apply all bt 20' 2>&1 | grep -E '^#|^Thread') >$o/st.$p 2>&1 &
    g+=($!)
  done
  wait ${g[*]}
  cat $o/st.* >$o/stacks.txt; rm -f $o/st.*
  kill -9 $c
fi
wait $c; echo "peer_copies rc=$?"
kill ${d[*]}; wait ${d[*]} 2>/dev/null
tail -5 $o/peer.out; tail -3 $o/peer.err; grep -h -i "warn\|error" $o/rgpud-*.log | head
