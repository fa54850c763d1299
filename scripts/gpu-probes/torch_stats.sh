#!/usr/bin/env bash
# What one training step sends to the server: runs examples/torch_train.py (MODEL, default cnn)
# through rgpu for 20 and for 120 steps with RGPU_STATS=1 and prints, per request type, the
# difference divided by 100 (requests, round trips and bytes per step), for each transport.
#   scripts/gpu-probes/torch_stats.sh [BUILD_DIR] [MODEL]
cd "$(dirname "$0")/../.."
b=${1:-build-gpu}
model=${2:-cnn}
o=$(mktemp -d)
$b/server/rgpud --backend cuda --listen 127.0.0.1:0 --port-file $o/port 2>$o/rgpud.log &
d=$!
trap 'kill $d 2>/dev/null; wait $d 2>/dev/null' EXIT
for _ in $(seq 100); do [ -s $o/port ] && break; sleep 0.1; done
export RGPU_SERVERS=127.0.0.1:$(cat $o/port)
for t in shm tcp; do
  for n in 20 120; do
    RGPU_STATS=1 RGPU_TRANSPORT=$t LD_LIBRARY_PATH=$PWD/$b/lib timeout 200 \
      python3 examples/torch_train.py --model $model --steps $n >$o/$t.$n.out 2>$o/$t.$n.err
  done
  echo "== $model over $t: per step (steps 20..120); step_ms $(grep step_ms $o/$t.120.out | cut -d' ' -f2)"
  python3 - $o/$t.20.err $o/$t.120.err <<'PY'
import sys
def read(p):
    d = {}
    for line in open(p):
        f = line.split()
        if len(f) == 7 and f[0] == "rgpu" and f[1] == "stats:" and f[3].isdigit():
            d[f[2]] = [int(x) for x in f[3:]]
    return d
a, b = read(sys.argv[1]), read(sys.argv[2])
rows = []
for k, v in b.items():
    u = a.get(k, [0, 0, 0, 0])
    diff = [(x - y) / 100 for x, y in zip(v, u)]
    if any(diff): rows.append((k, diff))
rows.sort(key=lambda r: -(r[1][0] + r[1][1]))
print(f"{'request':28} {'sync':>8} {'async':>8} {'bytes out':>12} {'bytes in':>12}")
for k, (s, a_, o, i) in rows:
    print(f"{k:28} {s:8.2f} {a_:8.2f} {o:12.0f} {i:12.0f}")
PY
done
