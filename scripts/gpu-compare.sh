#!/usr/bin/env bash
# On the GPU machine: `rgpu bench` of this tree and of an earlier one (a source tree in
# $RGPU_BASELINE, e.g. `git archive REV | tar -x -C .baseline`), back to back on the same card,
# plus this tree over TLS (a second rgpud with a throw-away certificate).  Prints both tables.
set -uo pipefail
cd "$(dirname "$0")/.."
root=$PWD
out="${OUT:-/tmp/rgpu-compare}"
mkdir -p "$out"
max="${RGPU_BENCH_MAX:-1GiB}"
cuda_root="${RGPU_CUDA_ROOT:-/usr/local/cuda}"
deps=()
[ -f .deps/include/sodium.h ] && deps=(-DRGPU_SODIUM_ROOT="$root/.deps" -DRGPU_DEPS_ROOT="$root/.deps")
build() {  # source dir, build dir
  cmake -S "$1" -B "$2" -G Ninja -DRGPU_BUILD_TESTS=OFF -DRGPU_CUDA_ROOT="$cuda_root" \
    -DRGPU_CUDA_ARCH="${RGPU_CUDA_ARCH:-sm_90}" "${deps[@]}" >"$out/build-$(basename "$2").log" 2>&1 &&
    ninja -C "$2" >>"$out/build-$(basename "$2").log" 2>&1 || { tail -20 "$out/build-$(basename "$2").log"; exit 1; }
}
start() {  # build dir, port file, extra args...
  local b=$1 pf=$2
  shift 2
  rm -f "$pf"
  "$b/server/rgpud" --backend cuda --listen 127.0.0.1:0 --port-file "$pf" "$@" 2>>"$out/rgpud.log" &
  for _ in $(seq 300); do [ -s "$pf" ] && break; sleep 0.05; done
}
bench() {  # label, build dir, servers, extra args...
  local label=$1 b=$2 s=$3
  shift 3
  echo "== bench $label"
  RGPU_SERVERS=$s timeout 400 "$b/cli/rgpu" bench --max-size "$max" "$@" >"$out/bench-$label.txt" 2>"$out/bench-$label.err" ||
    tail -5 "$out/bench-$label.err"
}
build . build-gpu
pids=()
start build-gpu "$out/new.port"; pids+=($!)
if [ -n "${RGPU_BASELINE:-}" ]; then
  build "$RGPU_BASELINE" build-baseline
  start build-baseline "$out/old.port"; pids+=($!)
  bench baseline build-baseline "127.0.0.1:$(cat "$out/old.port")"
fi
tls=()
if command -v openssl >/dev/null; then
  c="$out/certs"; mkdir -p "$c"
  openssl req -x509 -newkey rsa:2048 -nodes -days 1 -subj /CN=127.0.0.1 \
    -addext "subjectAltName=IP:127.0.0.1" -keyout "$c/key.pem" -out "$c/cert.pem" >/dev/null 2>&1
  start build-gpu "$out/tls.port" --tls-cert "$c/cert.pem" --tls-key "$c/key.pem"; pids+=($!)
  export RGPU_TLS_CA="$c/cert.pem"
  tls=(--tls "127.0.0.1:$(cat "$out/tls.port")")
fi
bench current build-gpu "127.0.0.1:$(cat "$out/new.port")" "${tls[@]}"
kill "${pids[@]}" 2>/dev/null
wait 2>/dev/null
card=$(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | head -1)
for f in "$out"/bench-*.txt; do echo "#### $(basename "$f") on $card"; cat "$f"; done
