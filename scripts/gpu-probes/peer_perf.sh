#!/usr/bin/env bash
# Where a cudaMemcpyPeer between two rgpuds on one machine spends CPU time: perf profiles of the
# client and both sessions while peer_issue.cu queues copies through rgpu over shm.  perf comes
# from PERF_DIR (a perf binary and its libraries; the GPU machine has none).
#   OUT=dir PERF_DIR=build-perf bash scripts/gpu-probes/peer_perf.sh [BUILD_DIR] [BYTES]
set -uo pipefail
cd "$(dirname "$0")/../.."
b=${1:-build-gpu}
bytes=${2:-4194304}
o=${OUT:-/tmp}/peer-perf; mkdir -p $o
pd=$PWD/${PERF_DIR:-build-perf}
perf() { LD_LIBRARY_PATH=$pd/lib $pd/perf "$@"; }
. scripts/gpu-probes/two_rgpuds.sh
for n in 4 $bytes; do RGPU_TRANSPORT=shm through $o/peer_issue 3000 $n | sed "s/^/shm: /"; done
echo "perf_event_paranoid: $(cat /proc/sys/kernel/perf_event_paranoid)"
RGPU_TRANSPORT=shm through $o/peer_issue 3000000 $bytes > $o/long.txt 2>&1 &
long=$!
sleep 2
cpid=$(pgrep -f "$o/peer_issue 3000000" | tail -1)
sess=$(for d in ${pids[*]}; do pgrep -P $d; done | tr '\n' ',')
echo "client $cpid sessions $sess"
perf record -q -F 1999 --call-graph dwarf,8192 -o $o/perf.data -p ${sess}$cpid -- sleep 2 2>&1 | tail -3
kill $long 2>/dev/null
echo "== CPU per thread (share of all samples; 2 s)"
perf report -i $o/perf.data --no-children --sort tid -g none 2>/dev/null | grep -v '^#' | grep '%' | head -12
echo "== with children, per process"
perf report -i $o/perf.data --children --sort pid,sym -g none 2>/dev/null | grep -v '^#' | grep '%' | grep -v '0x0000' | head -120
perf report -i $o/perf.data --no-children --sort pid,sym -g caller,0.5,callee --stdio 2>/dev/null > $o/graph.txt
