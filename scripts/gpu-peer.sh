#!/usr/bin/env bash
# Copies between GPUs of different servers on a machine with two GPUs: one rgpud per GPU
# (`--gpus 0`, `--gpus 1`, and a third on GPU 0), tests/cuda/peer_copies and cross_waits through
# them (every pair, sync/async, 2-D, stream order), then `rgpu bench --peer` (cross-server copy vs
# relay through the client vs a raw TCP stream) and native cudaMemcpyPeer for reference.
#   scripts/gpu-peer.sh [BUILD_DIR]        (after scripts/gpu-e2e.sh or gpu-torch.sh built it)
set -uo pipefail
cd "$(dirname "$0")/.."
b=${1:-build-gpu}
o=$(mktemp -d)
pids=()
trap 'kill ${pids[*]} 2>/dev/null; wait 2>/dev/null' EXIT
start() {  # name gpus
  $b/server/rgpud --backend cuda --gpus $2 --listen 127.0.0.1:0 --port-file $o/$1.port 2>$o/$1.log &
  pids+=($!)
}
start a 0; start b 1; start c 0
for n in a b c; do for _ in $(seq 100); do [ -s $o/$n.port ] && break; sleep 0.1; done; done
A=127.0.0.1:$(cat $o/a.port) B=127.0.0.1:$(cat $o/b.port) C=127.0.0.1:$(cat $o/c.port)
rows=()
through() { CUDA_VISIBLE_DEVICES=-1 LD_LIBRARY_PATH=$PWD/$b/lib "$@"; }
for t in tcp shm; do
  RGPU_TRANSPORT=$t RGPU_SERVERS=$A,$B,$C through timeout 280 $b/cuda/peer_copies >$o/peer.$t 2>&1; rc=$?
  rows+=("peer_copies $t: rc=$rc $(tail -1 $o/peer.$t)")
  RGPU_TRANSPORT=$t RGPU_SERVERS=$A,$B through timeout 120 $b/cuda/cross_waits >$o/xw.$t 2>&1; rc=$?
  rows+=("cross_waits $t: rc=$rc $(tail -1 $o/xw.$t)")
done
echo "== rgpu bench --peer (tcp), GPU 0 server -> GPU 1 server"
RGPU_TRANSPORT=tcp RGPU_SERVERS=$A,$B timeout 300 $b/cli/rgpu bench --peer --max-size 1G 2>&1 | tail -40
tail -n 30 $o/peer.tcp | grep -i "fail\|error" | head
tar -C $o -czf ${OUT:-/tmp}/peer-logs.tgz . 2>/dev/null
printf '%s\n' "${rows[@]}"
