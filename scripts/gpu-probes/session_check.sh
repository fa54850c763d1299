#!/usr/bin/env bash
# One quick pass on a two-GPU machine after scripts/gpu-peer.sh built build-gpu: peer_copies
# between three rgpuds (line-buffered, so a hang shows where), the CNN's step time natively and
# through rgpu (tcp, shm), PyTorch's probe with both GPUs of one rgpud (multi-device copies), and
# the CNN with expandable segments (the driver's virtual memory management).
cd "$(dirname "$0")/../.."
b=build-gpu; o=$(mktemp -d)
for n in a:0 b:1 c:0; do $b/server/rgpud --backend cuda --gpus ${n#*:} --listen 127.0.0.1:0 --port-file $o/${n%:*}.port 2>$o/${n%:*}.log & done
$b/server/rgpud --backend cuda --listen 127.0.0.1:0 --port-file $o/all.port 2>$o/all.log &
sleep 3
A=127.0.0.1:$(cat $o/a.port); B=127.0.0.1:$(cat $o/b.port); C=127.0.0.1:$(cat $o/c.port); S=127.0.0.1:$(cat $o/all.port)
lib=$PWD/$b/lib
echo "== peer_copies tcp, 3 servers"
RGPU_TRANSPORT=tcp RGPU_SERVERS=$A,$B,$C CUDA_VISIBLE_DEVICES=-1 LD_LIBRARY_PATH=$lib timeout 100 stdbuf -oL -eL $b/cuda/peer_copies >$o/pc 2>&1; echo "rc=$? lines=$(wc -l <$o/pc)"; grep -v "^ok" $o/pc | tail -5; tail -2 $o/pc
echo "== CNN 200 steps"
timeout 60 python3 examples/torch_train.py --model cnn --steps 200 >$o/n.txt 2>&1; echo "native $(grep step_ms $o/n.txt)"
for t in shm tcp; do
  RGPU_TRANSPORT=$t RGPU_SERVERS=$S LD_LIBRARY_PATH=$lib timeout 90 python3 examples/torch_train.py --model cnn --steps 200 >$o/$t.txt 2>$o/$t.err
  echo "$t rc=$? $(python3 scripts/compare_losses.py $o/n.txt $o/$t.txt)"
done
echo "== expandable segments, shm"
PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True RGPU_TRANSPORT=shm RGPU_SERVERS=$S LD_LIBRARY_PATH=$lib timeout 90 python3 examples/torch_train.py --model cnn --steps 50 >$o/x.txt 2>$o/x.err
echo "rc=$? $(python3 scripts/compare_losses.py <(head -50 $o/n.txt) $o/x.txt)"; grep -i "not supported\|error" $o/x.err | head -3
echo "== probe, both GPUs of one rgpud, tcp"
RGPU_TRANSPORT=tcp RGPU_SERVERS=$S,$S/1 LD_LIBRARY_PATH=$lib timeout 120 python3 examples/torch_probe.py >$o/p.txt 2>$o/p.err; echo "rc=$?"; grep -c "^ok" $o/p.txt; grep -v "^ok" $o/p.txt | head; grep "multi-device" $o/p.txt; tail -2 $o/p.err
kill $(jobs -p) 2>/dev/null
