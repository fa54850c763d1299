#!/usr/bin/env bash
# Runs torch_ops.py natively and through one local rgpud over shm and TCP (rgpu's libraries first,
# RGPU_STATS=1), side by side.   scripts/gpu-probes/torch_ops.sh [BUILD_DIR]
cd "$(dirname "$0")/../.."
b=${1:-build-gpu}
o=${OUT:-$(mktemp -d)}
$b/server/rgpud --backend cuda --listen 127.0.0.1:0 --port-file $o/port 2>$o/rgpud.log &
d=$!
trap 'kill $d 2>/dev/null; wait $d 2>/dev/null' EXIT
for _ in $(seq 100); do [ -s $o/port ] && break; sleep 0.1; done
export RGPU_SERVERS=127.0.0.1:$(cat $o/port)
timeout 200 python3 scripts/gpu-probes/torch_ops.py --profile >$o/native.out 2>$o/native.err
for t in shm tcp; do
  RGPU_STATS=1 RGPU_TRANSPORT=$t LD_LIBRARY_PATH=$PWD/$b/lib timeout 300 \
    python3 scripts/gpu-probes/torch_ops.py --profile >$o/$t.out 2>$o/$t.err
done
paste <(grep -E '^(op|cnn)' $o/native.out) <(grep -E '^(op|cnn)' $o/shm.out | awk '{print $(NF-1)}') \
  <(grep -E '^(op|cnn)' $o/tcp.out | awk '{print $(NF-1)}')
for f in native shm tcp; do echo "== $f profile"; sed -n '/Name/,$p' $o/$f.out | head -40; tail -3 $o/$f.err; done
grep -h "rgpu stats" $o/shm.err | head -40
