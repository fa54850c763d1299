#!/usr/bin/env bash
# Where a small cross-server copy's time goes: two rgpuds (--gpus 0, --gpus 1) with
# RGPU_PEER_TRACE=1 (each copy's phases on the active server, the fence wait on the passive one),
# `rgpu bench --peer` up to 64 KiB, with and without the mapped path (RGPU_PEER_IPC=0).
#   scripts/gpu-probes/peer_trace.sh [BUILD_DIR]
set -uo pipefail
cd "$(dirname "$0")/../.."
b=${1:-build-gpu}
o=$(mktemp -d)
pids=()
trap 'kill ${pids[*]} 2>/dev/null; wait 2>/dev/null' EXIT
start() {  # name gpus
  RGPU_PEER_TRACE=1 RGPU_LOG=notice $b/server/rgpud --backend cuda --gpus $2 --listen 127.0.0.1:0 \
    --port-file $o/$1.port 2>$o/$1.log &
  pids+=($!)
}
for ipc in 1 0; do
  RGPU_PEER_IPC=$ipc start a$ipc 0; RGPU_PEER_IPC=$ipc start b$ipc 1
  for n in a$ipc b$ipc; do for _ in $(seq 100); do [ -s $o/$n.port ] && break; sleep 0.1; done; done
  echo "== RGPU_PEER_IPC=$ipc"
  for t in tcp shm; do
    RGPU_TRANSPORT=$t RGPU_SERVERS=127.0.0.1:$(cat $o/a$ipc.port),127.0.0.1:$(cat $o/b$ipc.port) \
      timeout 120 $b/cli/rgpu bench --peer --max-size ${RGPU_TRACE_MAX:-64K} 2>&1 | sed -n '/^latency/,$p' | head -4 | sed "s/^/$t /"
  done
  echo "-- active server, 4-byte copies (µs since queued):"; grep -h "copy of 4 bytes" $o/b$ipc.log | tail -4
  echo "-- passive server:"; grep -h "fence after" $o/a$ipc.log | tail -3
  if [ $ipc = 1 ]; then  # a large copy's phases: is the DMA itself at the GPUs' speed?
    RGPU_TRANSPORT=tcp RGPU_SERVERS=127.0.0.1:$(cat $o/a1.port),127.0.0.1:$(cat $o/b1.port) \
      timeout 120 $b/cli/rgpu bench --peer --max-size 1G 2>&1 | grep -E "^(64 MiB|256 MiB|1 GiB)" | head -3
    grep -h "copy of 1073741824 bytes" $o/b1.log | tail -3
  fi
done
