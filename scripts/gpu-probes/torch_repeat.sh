#!/usr/bin/env bash
# examples/torch_probe.py natively once, then N times through rgpu over each TRANSPORT, each run
# compared with the native one (intermittent failures: races in the client).  Builds BUILD_DIR
# first when needed (as scripts/gpu-torch.sh does).
#   scripts/gpu-probes/torch_repeat.sh [BUILD_DIR] [N] [TRANSPORT...]
set -uo pipefail
cd "$(dirname "$0")/../.."
root=$PWD
b=${1:-build-gpu}
n=${2:-3}
shift 2 2>/dev/null
transports=("${@:-shm}")
o=$(mktemp -d)
if [ ! -x "$b/server/rgpud" ]; then
  deps=()
  [ -f .deps/include/sodium.h ] && deps=(-DRGPU_SODIUM_ROOT="$root/.deps" -DRGPU_DEPS_ROOT="$root/.deps")
  cmake -S . -B "$b" -G Ninja -DRGPU_BUILD_TESTS=OFF -DRGPU_CUDA_ROOT=/usr/local/cuda \
    -DRGPU_CUDA_ARCH=sm_90 "${deps[@]}" >"$o/build.log" 2>&1 &&
    ninja -C "$b" >>"$o/build.log" 2>&1 || { tail -20 "$o/build.log"; exit 1; }
  echo "built $b"
fi
"$b/server/rgpud" --backend cuda --listen 127.0.0.1:0 --port-file "$o/port" \
  --module-cache "$o/modules" 2>"$o/rgpud.log" &
d=$!
trap 'kill $d 2>/dev/null; wait $d 2>/dev/null' EXIT
for _ in $(seq 100); do [ -s "$o/port" ] && break; sleep 0.1; done
timeout -s KILL 150 python3 examples/torch_probe.py >"$o/native" 2>"$o/native.err"
echo "native: rc=$? ok=$(grep -c '^ok' "$o/native")"
for t in "${transports[@]}"; do
  for i in $(seq "$n"); do
    start=$(date +%s)
    RGPU_STATS=1 RGPU_TRANSPORT=$t RGPU_SERVERS="127.0.0.1:$(cat "$o/port")" \
      LD_LIBRARY_PATH="$root/$b/lib" timeout -s KILL 150 python3 examples/torch_probe.py \
      >"$o/$t.$i" 2>"$o/$t.$i.err"
    rc=$?
    differs=$(diff "$o/native" "$o/$t.$i" | grep '^[<>]' | cut -c1-100 | head -6)
    echo "$t run $i: rc=$rc ok=$(grep -c '^ok' "$o/$t.$i") $(($(date +%s) - start)) s"
    [ -n "$differs" ] && echo "$differs"
    if [ $rc -ne 0 ] || [ -n "$differs" ]; then
      grep -E "corrupt|free\(\)|abort|rgpu: (error|warning)|Error|error" "$o/$t.$i.err" | sort | uniq -c | sort -rn | head -15
    fi
    grep -E "rgpu stats|images|round trips" "$o/$t.$i.err" | tail -3
  done
done
grep -cE "error|warn" "$o/rgpud.log" | sed 's/^/rgpud log error|warn lines: /'
grep -E "error|warn" "$o/rgpud.log" | sort | uniq -c | sort -rn | head -8
