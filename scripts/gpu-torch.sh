#!/usr/bin/env bash
# PyTorch and NVIDIA's libraries on rgpu, natively and through rgpu (TCP and shared memory), on a
# machine with an NVIDIA GPU: NVIDIA's library test program (cuBLAS, cuBLASLt, cuFFT, cuRAND,
# cuSOLVER, cuSPARSE), the PyTorch feature probe, and the training loops whose loss curves must
# equal native (each step within 1e-5 relative) with their step times.  Prints a table; exits
# non-zero when a check failed.
#   scripts/gpu-torch.sh [BUILD_DIR]     (scripts/gpu-e2e.sh runs it; it builds if needed)
# RGPU_TORCH_STEPS (200) and RGPU_TORCH_TRANSFORMER_STEPS (30) set the training lengths.
set -uo pipefail
cd "$(dirname "$0")/.."
root=$PWD
build="${1:-${RGPU_BUILD_DIR:-build-gpu}}"
cuda_root="${RGPU_CUDA_ROOT:-/usr/local/cuda}"
out=$(mktemp -d)
if [ ! -x "$build/server/rgpud" ] || [ ! -x "$build/cuda/nvidia_libs" ]; then
  deps=()
  [ -f .deps/include/sodium.h ] && deps=(-DRGPU_SODIUM_ROOT="$root/.deps" -DRGPU_DEPS_ROOT="$root/.deps")
  cmake -S . -B "$build" -G Ninja -DRGPU_BUILD_TESTS=OFF -DRGPU_CUDA_ROOT="$cuda_root" \
    -DRGPU_CUDA_ARCH="${RGPU_CUDA_ARCH:-sm_90}" "${deps[@]}" >"$out/build.log" 2>&1 &&
    ninja -C "$build" >>"$out/build.log" 2>&1 || { tail -20 "$out/build.log"; exit 1; }
fi
"$build/server/rgpud" --backend cuda --listen 127.0.0.1:0 --port-file "$out/port" \
  --module-cache "$out/modules" 2>"$out/rgpud.log" &
daemon=$!
trap 'kill $daemon 2>/dev/null; wait $daemon 2>/dev/null' EXIT
for _ in $(seq 300); do [ -s "$out/port" ] && break; sleep 0.05; done
servers="127.0.0.1:$(cat "$out/port")"
nvrt="$out/nvrt-lib"
mkdir -p "$nvrt"
ln -sf "$cuda_root/lib64/libcudart.so.13" "$nvrt/libcudart.so.13"
ln -sf "$root/$build/lib/libcuda.so.1" "$nvrt/libcuda.so.1"
limited() {  # seconds, command...
  local secs=$1; shift
  timeout -s KILL "$secs" "$@"
}
rows=()
failures=0
row() {  # also printed at once: a run cut short still shows what it measured
  rows+=("$(printf '%-24s %-12s %-12s %-12s %s' "$@")")
  echo "row: ${rows[-1]}"
}
# The client never reaches the local GPU: rgpu's libraries first; CUDA_VISIBLE_DEVICES=-1 where the
# program does not read it itself (PyTorch does, so it is left alone there).
through() {  # transport, library dir, command...
  local t=$1 lib=$2; shift 2
  RGPU_TRANSPORT=$t RGPU_SERVERS="$servers" LD_LIBRARY_PATH="$lib" "$@"
}

echo "== NVIDIA's libraries (cuBLAS, cuBLASLt, cuFFT, cuRAND, cuSOLVER, cuSPARSE from the toolkit)"
LD_LIBRARY_PATH="$cuda_root/lib64" limited 180 "$build/cuda/nvidia_libs" compute >"$out/libs.native" 2>"$out/libs.native.err"; nrc=$?
CUDA_VISIBLE_DEVICES=-1 through tcp "$root/$build/lib" limited 180 "$build/cuda/nvidia_libs" compute >"$out/libs.tcp" 2>"$out/libs.tcp.err"; trc=$?
CUDA_VISIBLE_DEVICES=-1 through shm "$nvrt" limited 180 "$build/cuda/nvidia_libs" compute >"$out/libs.shm" 2>"$out/libs.shm.err"; src=$?
same=identical
diff -q "$out/libs.native" "$out/libs.tcp" >/dev/null || same=DIFFERENT
diff -q "$out/libs.native" "$out/libs.shm" >/dev/null || same=DIFFERENT
[ $nrc -eq 0 ] && [ $trc -eq 0 ] && [ $src -eq 0 ] && [ $same = identical ] || failures=$((failures + 1))
row "nvidia_libs compute" "rc=$nrc" "rc=$trc" "rc=$src" "$same (tcp: rgpu's runtime; shm: NVIDIA's runtime)"

if python3 -c "import torch" 2>/dev/null; then
  echo "== PyTorch feature probe"
  limited 150 python3 examples/torch_probe.py >"$out/probe.native" 2>"$out/probe.native.err"; nrc=$?
  for t in tcp shm; do
    through $t "$root/$build/lib" limited 150 python3 examples/torch_probe.py >"$out/probe.$t" 2>"$out/probe.$t.err"; rc=$?
    differs=$(diff "$out/probe.native" "$out/probe.$t" | grep '^>' | cut -c3- | cut -d: -f1 | tr '\n' ',' | cut -c1-80)
    [ $nrc -eq 0 ] && [ $rc -eq 0 ] && [ -z "$differs" ] || failures=$((failures + 1))
    row "torch_probe $t" "ok $(grep -c '^ok' "$out/probe.native")" "ok $(grep -c '^ok' "$out/probe.$t")" "-" \
      "${differs:+differs: $differs}${differs:-all $(grep -c '^ok' "$out/probe.native") features as native}"
  done
  for model in cnn transformer; do
    steps=${RGPU_TORCH_STEPS:-200}
    [ $model = transformer ] && steps=${RGPU_TORCH_TRANSFORMER_STEPS:-30}
    echo "== training: $model, $steps steps"
    limited 120 python3 examples/torch_train.py --model $model --steps "$steps" >"$out/train-$model.native" 2>&1; nrc=$?
    for t in tcp shm; do
      through $t "$root/$build/lib" limited 200 python3 examples/torch_train.py --model $model --steps "$steps" \
        >"$out/train-$model.$t" 2>"$out/train-$model.$t.err"; rc=$?
      cmp=$(python3 scripts/compare_losses.py "$out/train-$model.native" "$out/train-$model.$t"); crc=$?
      [ $nrc -eq 0 ] && [ $rc -eq 0 ] && [ $crc -eq 0 ] || failures=$((failures + 1))
      row "train $model $t" "rc=$nrc" "rc=$rc" "-" "$cmp"
    done
  done
fi
tar -C "$out" -czf "${OUT:-/tmp}/torch-logs.tgz" --exclude modules --exclude nvrt-lib . 2>/dev/null
echo
printf '%-24s %-12s %-12s %-12s %s\n' check native "rgpu a" "rgpu b" result
for r in "${rows[@]}"; do echo "$r"; done
echo "torch checks failed: $failures"
[ $failures -eq 0 ]
