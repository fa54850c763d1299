#!/usr/bin/env bash
# Copies between GPUs of different servers on a machine with two GPUs: one rgpud per GPU
# (`--gpus 0`, `--gpus 1`, and a third on GPU 0), tests/cuda/peer_copies and cross_waits through
# them (every pair, sync/async, 2-D, stream order), then `rgpu bench --peer` (cross-server copy vs
# relay through the client vs a raw TCP stream vs native cudaMemcpyPeer), once as the daemons run
# by default (on one machine they map each other's memory: server/peer_ipc.h) and once through
# the staging pipeline over TCP (RGPU_PEER_IPC=0).
# A program still running after its limit has its stacks and the sessions' taken (cuda-gdb) into
# the logs tarball before it is killed.
#   scripts/gpu-peer.sh [BUILD_DIR]        (after scripts/gpu-e2e.sh or gpu-torch.sh built it)
# RGPU_PEER_LIMIT: seconds per test program (240); RGPU_PEER_MAX: bench's largest copy (1G);
# RGPU_PEER_PIPE_MAX: the pipeline bench's (256M); RGPU_PEER_SHM_MAX: the bench over shm's (256M).
set -uo pipefail
cd "$(dirname "$0")/.."
b=${1:-build-gpu}
o=$(mktemp -d)
pids=()
trap 'kill ${pids[*]} 2>/dev/null; wait 2>/dev/null' EXIT
start() {  # name gpus
  RGPU_LOG=${RGPU_LOG:-info} $b/server/rgpud --backend cuda --gpus $2 --listen 127.0.0.1:0 --port-file $o/$1.port 2>$o/$1.log &
  pids+=($!)
}
# One GPU only: every daemon serves GPU 0 (copies between daemons then stay on one GPU, and the
# bench has no native two-GPU row).
g2=1
if [ "$(nvidia-smi -L 2>/dev/null | grep -c '^GPU')" -lt 2 ]; then g2=0; echo "one GPU: all daemons on GPU 0"; fi
start a 0; start b $g2; start c 0
for n in a b c; do for _ in $(seq 100); do [ -s $o/$n.port ] && break; sleep 0.1; done; done
A=127.0.0.1:$(cat $o/a.port) B=127.0.0.1:$(cat $o/b.port) C=127.0.0.1:$(cat $o/c.port)
rows=()
through() { CUDA_VISIBLE_DEVICES=-1 LD_LIBRARY_PATH=$PWD/$b/lib "$@"; }
dbg=$(command -v cuda-gdb || command -v gdb)
# Runs "$@" (output to $1's file, given first) for at most $2 seconds; past that, the stacks of
# the program and of every rgpud session process go to $o/stacks-*.txt before it is killed.
tree() { echo $1; for c in $(pgrep -P $1); do tree $c; done; }  # a process and its descendants
run_or_stacks() {  # outfile seconds command...
  local out=$1 limit=$2; shift 2
  "$@" >"$out" 2>&1 &
  local pid=$! waited=0
  while kill -0 $pid 2>/dev/null && [ $waited -lt $limit ]; do sleep 1; waited=$((waited + 1)); done
  if kill -0 $pid 2>/dev/null; then
    echo "HUNG after ${limit}s: $*" >>"$out"
    for p in $(tree $pid) $(for d in ${pids[*]}; do pgrep -P $d; done); do
      timeout 90 $dbg -batch -p $p -ex "thread apply all bt" >$o/stacks-$p.txt 2>&1
    done
    kill -9 $(tree $pid) 2>/dev/null
  fi
  wait $pid
}
for t in tcp shm; do
  RGPU_TRANSPORT=$t RGPU_SERVERS=$A,$B,$C run_or_stacks $o/peer.$t ${RGPU_PEER_LIMIT:-240} \
    through stdbuf -oL $b/cuda/peer_copies; rc=$?
  rows+=("peer_copies $t: rc=$rc $(tail -1 $o/peer.$t)")
  RGPU_TRANSPORT=$t RGPU_SERVERS=$A,$B through timeout 120 $b/cuda/cross_waits >$o/xw.$t 2>&1; rc=$?
  rows+=("cross_waits $t: rc=$rc $(tail -1 $o/xw.$t)")
done
# PyTorch moving tensors between the two servers' GPUs, against the same natively.
if python3 -c "import torch" 2>/dev/null; then
  timeout 300 python3 scripts/gpu-probes/torch_peer.py >$o/tp.native 2>$o/tp.native.err; nrc=$?
  RGPU_TRANSPORT=tcp RGPU_SERVERS=$A,$B LD_LIBRARY_PATH=$PWD/$b/lib timeout 300 \
    python3 scripts/gpu-probes/torch_peer.py >$o/tp.rgpu 2>$o/tp.rgpu.err; rc=$?
  same=differ
  diff <(grep -v "peer access" $o/tp.native) <(grep -v "peer access" $o/tp.rgpu) >/dev/null && same=identical
  rows+=("torch_peer: native rc=$nrc, rgpu rc=$rc, output $same ($(grep -c True $o/tp.rgpu) checks true)")
  echo "== torch_peer"; cat $o/tp.rgpu; tail -3 $o/tp.rgpu.err; echo "-- native:"; tail -2 $o/tp.native.err
fi
echo "== rgpu bench --peer (tcp), GPU 0 server -> GPU 1 server (the daemons map each other's memory)"
RGPU_TRANSPORT=tcp RGPU_SERVERS=$A,$B timeout 300 $b/cli/rgpu bench --peer --max-size ${RGPU_PEER_MAX:-1G} 2>&1 | tail -40
grep -h "map its memory\|staging buffers" $o/b.log | sort | uniq -c | head -3
echo "== rgpu bench --peer (shm to each server), the same daemons"
RGPU_TRANSPORT=shm RGPU_SERVERS=$A,$B timeout 300 $b/cli/rgpu bench --peer --max-size ${RGPU_PEER_SHM_MAX:-256M} 2>&1 | tail -30
# The same through the staging pipeline over TCP: two more daemons with RGPU_PEER_IPC=0.
RGPU_PEER_IPC=0 start d 0; RGPU_PEER_IPC=0 start e $g2
for n in d e; do for _ in $(seq 100); do [ -s $o/$n.port ] && break; sleep 0.1; done; done
D=127.0.0.1:$(cat $o/d.port) E=127.0.0.1:$(cat $o/e.port)
echo "== rgpu bench --peer (tcp), pipeline over TCP (RGPU_PEER_IPC=0)"
RGPU_TRANSPORT=tcp RGPU_SERVERS=$D,$E timeout 300 $b/cli/rgpu bench --peer --max-size ${RGPU_PEER_PIPE_MAX:-256M} 2>&1 | tail -30
tail -n 30 $o/peer.tcp | grep -i "fail\|error" | head
tar -C $o -czf ${OUT:-/tmp}/peer-logs.tgz . 2>/dev/null
printf '%s\n' "${rows[@]}"
