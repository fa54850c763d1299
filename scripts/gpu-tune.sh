#!/usr/bin/env bash
# Measures the bulk pipeline's settings on a GPU machine (after scripts/gpu-e2e.sh built it):
# chunk size and depth (rgpud --chunk-size / --pipeline-depth) and the client's eager threshold
# (RGPU_EAGER_BYTES).  Prints one table per sweep; docs/benchmarks.md records the results.
set -uo pipefail
cd "$(dirname "$0")/.."
build="${RGPU_BUILD_DIR:-build-gpu}"
tmp=$(mktemp -d)

run_with() {  # rgpud args... -- env assignments... -- bench args...
  local args=() envs=() bargs=()
  while [ "$1" != "--" ]; do args+=("$1"); shift; done; shift
  while [ "$1" != "--" ]; do envs+=("$1"); shift; done; shift
  bargs=("$@")
  rm -f "$tmp/port"
  "$build/server/rgpud" --backend cuda --listen 127.0.0.1:0 --port-file "$tmp/port" "${args[@]}" 2>/dev/null &
  local daemon=$!
  for _ in $(seq 200); do [ -s "$tmp/port" ] && break; sleep 0.05; done
  env RGPU_SERVERS="127.0.0.1:$(cat "$tmp/port")" "${envs[@]}" "$build/cli/rgpu" bench "${bargs[@]}" 2>/dev/null
  kill $daemon; wait $daemon 2>/dev/null
}
value() {  # json op bytes: rgpu's GB/s
  python3 -c 'import json,sys; print(next(("%.2f" % r["value"] for r in json.load(open(sys.argv[1]))
    if r["op"] == sys.argv[2] and r["bytes"] == int(sys.argv[3]) and r["mode"] == "rgpu"), "-"))' "$@"
}

echo "chunk/depth sweep (GB/s through rgpu, pinned; 4 MiB and 64 MiB copies)"
printf '%-16s %10s %10s %10s %10s\n' setting h2d-4MiB h2d-64MiB d2h-4MiB d2h-64MiB
for s in "512KiB 8" "2MiB 8" "8MiB 2" "8MiB 8" "32MiB 4"; do
  set -- $s
  run_with --chunk-size "$1" --pipeline-depth "$2" -- X=1 -- --max-size 64MiB \
    --json "$tmp/b.json" >/dev/null
  printf '%-16s %10s %10s %10s %10s\n' "$1 x $2" "$(value "$tmp/b.json" h2d_pinned 4194304)" \
    "$(value "$tmp/b.json" h2d_pinned 67108864)" "$(value "$tmp/b.json" d2h_pinned 4194304)" \
    "$(value "$tmp/b.json" d2h_pinned 67108864)"
done

echo
echo "eager threshold (GB/s of pageable host-to-device copies through rgpu, copy + synchronize)"
printf '%-22s %10s %10s %10s %10s\n' RGPU_EAGER_BYTES 64B 1KiB 16KiB 256KiB
for e in 0 256KiB; do
  run_with -- RGPU_EAGER_BYTES=$e -- --max-size 1MiB --json "$tmp/e.json" >/dev/null
  printf '%-22s %10s %10s %10s %10s\n' "$e" "$(value "$tmp/e.json" h2d_pageable 64)" \
    "$(value "$tmp/e.json" h2d_pageable 1024)" "$(value "$tmp/e.json" h2d_pageable 16384)" \
    "$(value "$tmp/e.json" h2d_pageable 262144)"
done
rm -rf "$tmp"
