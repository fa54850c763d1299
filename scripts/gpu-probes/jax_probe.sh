#!/usr/bin/env bash
# Runs jax_probe.py natively and through one local rgpud over shm and TCP (rgpu's libraries first),
# and compares their lines.   scripts/gpu-probes/jax_probe.sh [BUILD_DIR]
cd "$(dirname "$0")/../.."
b=${1:-build-gpu}
o=${OUT:-$(mktemp -d)}; mkdir -p $o
source scripts/gpu-probes/one_rgpud.sh
timeout 200 python3 scripts/gpu-probes/jax_probe.py >$o/native.out 2>$o/native.err
echo "native rc=$?"
for t in shm tcp; do
  RGPU_TRANSPORT=$t LD_LIBRARY_PATH=$PWD/$b/lib timeout 200 \
    python3 scripts/gpu-probes/jax_probe.py >$o/$t.out 2>$o/$t.err
  echo "$t rc=$? $(diff -q $o/native.out $o/$t.out >/dev/null && echo identical || echo DIFFERENT)"
done
for f in native shm tcp; do
  echo "== $f"; cat $o/$f.out
  grep -E "^rgpu" $o/$f.err | sort | uniq -c | sort -rn | head -20
  grep -E "rror" $o/$f.err | grep -v "^rgpu" | sort | uniq -c | sort -rn | head -5 | cut -c1-300
done
echo "sessions in rgpud.log (work went remote): $(grep -c "session" $o/rgpud.log)"
