# Sourced by the single-daemon probes (jax_probe.sh, jax_diag.sh) from the repository root with
# $b (build folder) and $o (output folder) set: starts one rgpud on the GPU (log $o/rgpud.log,
# killed at exit) and exports RGPU_SERVERS for it.
RGPU_LOG=info $b/server/rgpud --backend cuda --listen 127.0.0.1:0 --port-file $o/port 2>$o/rgpud.log &
d=$!
trap 'kill $d 2>/dev/null; wait $d 2>/dev/null' EXIT
for _ in $(seq 100); do [ -s $o/port ] && break; sleep 0.1; done
if [ ! -s $o/port ] || [ ! -e $b/lib/libcuda.so.1 ]; then
  echo "one_rgpud: rgpud did not start or $b/lib has no libcuda.so.1 (build $b first)" >&2
  cat $o/rgpud.log >&2
  exit 1
fi
export RGPU_SERVERS=127.0.0.1:$(cat $o/port)
