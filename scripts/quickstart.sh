#!/usr/bin/env bash
# The main job: set up, build, start a local rgpud (on the GPU when there is one, else the host
# backend), and run the bundled CUDA example through it.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
scripts/build.sh -DRGPU_BUILD_TESTS=OFF >/dev/null
build="${RGPU_BUILD_DIR:-build}"

port_file=$(mktemp)
rm -f "$port_file"
"$build/server/rgpud" --backend auto --listen "127.0.0.1:${RGPU_PORT:-0}" --port-file "$port_file" &
daemon=$!
trap 'kill $daemon 2>/dev/null; wait $daemon 2>/dev/null; rm -f "$port_file"' EXIT
for _ in $(seq 200); do [ -s "$port_file" ] && break; sleep 0.05; done
[ -s "$port_file" ] || { echo "quickstart: rgpud did not start" >&2; exit 1; }
export RGPU_SERVERS="127.0.0.1:$(cat "$port_file")"

echo "== rgpu ls"
"$build/cli/rgpu" ls
echo "== rgpu run $build/examples/hello_rgpu"
"$build/cli/rgpu" run "$build/examples/hello_rgpu"
