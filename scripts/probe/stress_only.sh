set -u
build=build-gpu
cmake -S . -B $build -G Ninja -DRGPU_BUILD_TESTS=OFF -DRGPU_CUDA_ARCH=sm_90 -DRGPU_SODIUM_ROOT=$PWD/.deps -DRGPU_DEPS_ROOT=$PWD/.deps >/tmp/b.log 2>&1 && ninja -C $build >>/tmp/b.log 2>&1 || { tail -20 /tmp/b.log; exit 1; }
RGPU_LOG=info $build/server/rgpud --backend cuda --listen 127.0.0.1:0 --port-file /tmp/port 2>$OUT/rgpud.log &
d=$!
for _ in $(seq 100); do [ -s /tmp/port ] && break; sleep 0.1; done
P=$(cat /tmp/port); f=0
for i in $(seq ${N:-40}); do
  RGPU_TRANSPORT=tcp RGPU_SERVERS=127.0.0.1:$P LD_LIBRARY_PATH=$PWD/$build/lib timeout 60 $build/cuda/stress_mix 4 >/tmp/o 2>/tmp/e; rc=$?
  if [ $rc -ne 0 ]; then f=$((f+1)); cp /tmp/o $OUT/fail-$i.out; cp /tmp/e $OUT/fail-$i.err; echo "run $i rc=$rc"; fi
done
echo "failures $f of ${N:-40}"
kill $d
