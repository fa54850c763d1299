# On a GPU machine (the device tool, carry .deps): builds, starts rgpud --backend cuda, runs
# stress_mix over TCP until a run outlives 8 s, then saves the stacks of the client and of
# rgpud's session processes to $OUT/stacks.txt (how the reply-group deadlock was found).
set -u
build=build-gpu
cmake -S . -B $build -G Ninja -DRGPU_BUILD_TESTS=OFF -DRGPU_CUDA_ARCH=sm_90 -DRGPU_SODIUM_ROOT=$PWD/.deps -DRGPU_DEPS_ROOT=$PWD/.deps >/tmp/b.log 2>&1 && ninja -C $build >>/tmp/b.log 2>&1 || { tail -20 /tmp/b.log; exit 1; }
RGPU_LOG=info $build/server/rgpud --backend cuda --listen 127.0.0.1:0 --port-file /tmp/port 2>$OUT/rgpud.log &
d=$!
for _ in $(seq 100); do [ -s /tmp/port ] && break; sleep 0.1; done
P=$(cat /tmp/port); G=$(command -v gdb || command -v cuda-gdb)
for i in $(seq 60); do
  RGPU_TIMEOUT=0 RGPU_TRANSPORT=tcp RGPU_SERVERS=127.0.0.1:$P LD_LIBRARY_PATH=$PWD/$build/lib $build/cuda/stress_mix 4 >/tmp/o 2>/tmp/e &
  c=$!
  for t in $(seq 80); do kill -0 $c 2>/dev/null || break; sleep 0.1; done
  if kill -0 $c 2>/dev/null; then
    echo "run $i stuck"
    { echo "== client"; timeout 60 $G -batch -p $c -ex "thread apply all bt 15" 2>&1 | grep -E '^#|^Thread'
      for s in $(pgrep -P $d); do echo "== session $s"; timeout 60 $G -batch -p $s -ex "thread apply all bt 15" 2>&1 | grep -E '^#|^Thread'; done
    } > $OUT/stacks.txt 2>&1
    kill -9 $c; break
  fi
  wait $c
done
kill $d
