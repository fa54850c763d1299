# Sourced by the peer probes (peer_issue.sh, peer_perf.sh) with $b (build folder) and $o (output
# folder) set: builds peer_issue.cu into $o, starts one rgpud per GPU (both on GPU 0 on a one-GPU
# machine; killed at exit), sets S (RGPU_SERVERS for the two) and through() (runs a command as
# their client, the local GPU hidden).
nvcc -O2 -o $o/peer_issue scripts/gpu-probes/peer_issue.cu || exit 1
g2=1; [ "$(nvidia-smi -L | grep -c '^GPU')" -lt 2 ] && g2=0
pids=()
for n in 0 1; do
  $b/server/rgpud --backend cuda --gpus $([ $n = 0 ] && echo 0 || echo $g2) --listen 127.0.0.1:0 --port-file $o/$n.port 2>$o/d$n.log &
  pids+=($!)
  for _ in $(seq 100); do [ -s $o/$n.port ] && break; sleep 0.1; done
done
trap 'kill ${pids[*]} 2>/dev/null' EXIT
S=127.0.0.1:$(cat $o/0.port)/0,127.0.0.1:$(cat $o/1.port)/0
through() { CUDA_VISIBLE_DEVICES=-1 LD_LIBRARY_PATH=$PWD/$b/lib RGPU_SERVERS=$S "$@"; }
