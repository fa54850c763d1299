set -u
b=build-gpu
deps=(-DRGPU_SODIUM_ROOT=$PWD/.deps -DRGPU_DEPS_ROOT=$PWD/.deps)
t0=$SECONDS
cmake -S . -B $b -G Ninja -DRGPU_BUILD_TESTS=OFF -DRGPU_CUDA_ROOT=/usr/local/cuda -DRGPU_CUDA_ARCH=sm_90 "${deps[@]}" >/tmp/b.log 2>&1 && ninja -C $b >>/tmp/b.log 2>&1 || { tail -20 /tmp/b.log; exit 1; }
echo "build $((SECONDS-t0)) s"
OUT=$OUT/jax timeout 420 bash scripts/gpu-probes/jax_probe.sh $b 2>&1 | tail -80
mkdir -p $OUT/at0; o=$OUT/at0; source scripts/gpu-probes/one_rgpud.sh 2>/dev/null
XLA_FLAGS=--xla_gpu_autotune_level=0 RGPU_TRANSPORT=tcp LD_LIBRARY_PATH=$PWD/$b/lib timeout 150 python3 scripts/gpu-probes/jax_probe.py > $OUT/at0/tcp.out 2>$OUT/at0/tcp.err; echo "tcp autotune0 rc=$?"; cat $OUT/at0/tcp.out; grep -E "^rgpu" $OUT/at0/tcp.err | sort | uniq -c | sort -rn | head
echo total $((SECONDS-t0)) s
