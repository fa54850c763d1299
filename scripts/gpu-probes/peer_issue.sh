#!/usr/bin/env bash
# Where a cudaMemcpyPeer between two rgpuds on one machine spends its time: peer_issue.cu through
# rgpu (client over shm and tcp), and, while a long run goes on, stack samples (gdb) of both
# sessions' dispatcher threads, counted by their innermost rgpu/CUDA frames.
#   OUT=dir bash scripts/gpu-probes/peer_issue.sh [BUILD_DIR]
set -uo pipefail
cd "$(dirname "$0")/../.."
b=${1:-build-gpu}
o=${OUT:-/tmp}/peer-issue; mkdir -p $o
. scripts/gpu-probes/two_rgpuds.sh
for t in shm tcp; do for n in 4 4194304; do RGPU_TRANSPORT=$t through $o/peer_issue 3000 $n | sed "s/^/$t: /"; done; done
RGPU_TRANSPORT=shm through $o/peer_issue 6000000 4 > $o/long.txt 2>&1 &
long=$!
sleep 2
dbg=$(command -v gdb || command -v cuda-gdb)
cpid=$(pgrep -f "$o/peer_issue 6000000" | tail -1)  # the client itself
for d in ${pids[*]} client; do
  for p in $(if [ $d = client ]; then echo $cpid; else pgrep -P $d; fi); do
    for i in $(seq 12); do timeout 20 $dbg -batch -p $p -ex "thread apply all bt 14" 2>/dev/null; done > $o/samples-$p.txt
    echo "== session $p (rgpud $d): innermost rgpu frames of busy threads, 12 samples"
    awk '/^Thread/{t=$0; n=0} /^#/{n++; if (n<=14 && $0 ~ /rgpu::|cu[A-Z][a-zA-Z]+|ioctl|futex|recv|send|poll/) print}' $o/samples-$p.txt |
      grep -o 'rgpu::[A-Za-z_:]*\|in cu[A-Za-z0-9_]*\|ioctl\|__libc_recv\|__libc_send\|futex_wait' | sort | uniq -c | sort -rn | head -25
  done
done
kill $long 2>/dev/null
