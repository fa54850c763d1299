#!/usr/bin/env bash
# Sweeps the server-to-server pipeline's chunking on a machine with two GPUs (issue 14, item 2):
# for each setting, one rgpud per GPU started with RGPU_PEER_ONESHOT / RGPU_PEER_CHUNK (the
# one-shot limit and one chunk size for larger copies; server/peer_pipe.h), then
# `rgpu bench --peer` over TCP from GPU 0's server to GPU 1's.  Prints one row of peer-copy GB/s
# per setting, then the relay through the client and the raw TCP link for reference.
#   scripts/gpu-peer-tune.sh [BUILD_DIR]      (after gpu-e2e.sh or gpu-peer.sh built it)
# RGPU_PEER_MAX: the largest copy (256M); RGPU_PEER_SETTINGS: "ONESHOT:CHUNK ..." to try.
set -uo pipefail
cd "$(dirname "$0")/.."
b=${1:-build-gpu}
o=$(mktemp -d)
max=${RGPU_PEER_MAX:-256M}
pids=()
trap 'kill ${pids[*]} 2>/dev/null; wait 2>/dev/null' EXIT
value() {  # json mode bytes
  python3 -c 'import json,sys
v=[r["value"] for r in json.load(open(sys.argv[1])) if r["op"]=="cross" and r["mode"]==sys.argv[2] and r["bytes"]==int(sys.argv[3])]
print("%.2f" % v[0] if v else "-")' "$@" 2>/dev/null || echo -
}
sizes="65536 262144 1048576 4194304 16777216 67108864 268435456"
row() {  # label json mode
  printf '%-16s' "$1"
  for s in $sizes; do printf '%10s' "$(value "$2" "$3" "$s")"; done
  echo
}
printf '%-16s' "oneshot:chunk"
for s in $sizes; do printf '%10s' "$((s >> 10))K"; done
echo "   (peer copy GB/s, TCP)"
for setting in ${RGPU_PEER_SETTINGS:-default 256K:256K 256K:2M 256K:4M 256K:16M 64K:1M 1M:4M}; do
  env=()
  [ "$setting" = default ] || env=(RGPU_PEER_ONESHOT="${setting%%:*}" RGPU_PEER_CHUNK="${setting##*:}")
  rm -f $o/*.port
  for g in 0 1; do
    env "${env[@]}" $b/server/rgpud --backend cuda --gpus $g --listen 127.0.0.1:0 \
      --port-file $o/$g.port 2>$o/rgpud-$g.log &
    pids+=($!)
  done
  for g in 0 1; do for _ in $(seq 100); do [ -s $o/$g.port ] && break; sleep 0.1; done; done
  RGPU_TRANSPORT=tcp RGPU_SERVERS=127.0.0.1:$(cat $o/0.port),127.0.0.1:$(cat $o/1.port) \
    timeout 300 $b/cli/rgpu bench --peer --max-size "$max" --json $o/p.json >$o/p.txt 2>&1 ||
    { echo "$setting: bench failed"; tail -5 $o/p.txt; }
  row "$setting" $o/p.json peer
  kill ${pids[*]} 2>/dev/null
  wait 2>/dev/null
  pids=()
done
row "relay (client)" $o/p.json relay
row "raw TCP link" $o/p.json link
