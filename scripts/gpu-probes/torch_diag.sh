#!/usr/bin/env bash
# Where PyTorch stops on rgpu: builds rgpu's client libraries and rgpud, starts rgpud, runs a short
# PyTorch snippet through rgpu with a backtrace on a crash, finds which of PyTorch's libraries ask
# for export tables rgpu lacks, and prints those tables' sizes on the real driver.
#   scripts/gpu-probes/torch_diag.sh 'python statements'  [UUID ...]
cd "$(dirname "$0")/../.."
b=build-gpu
deps=()
[ -f .deps/include/sodium.h ] && deps=(-DRGPU_SODIUM_ROOT="$PWD/.deps" -DRGPU_DEPS_ROOT="$PWD/.deps")
cmake -S . -B $b -G Ninja -DRGPU_BUILD_TESTS=OFF -DRGPU_CUDA_ARCH=sm_90 "${deps[@]}" >/dev/null &&
  ninja -C $b server/rgpud lib/libcuda.so.1 lib/libcudart.so.13 >/dev/null || exit 1
snippet=$1; shift
o=$(mktemp -d)
$b/server/rgpud --backend cuda --listen 127.0.0.1:0 --port-file $o/port 2>$o/rgpud.log &
d=$!
for _ in $(seq 100); do [ -s $o/port ] && break; sleep 0.1; done
export RGPU_SERVERS=127.0.0.1:$(cat $o/port)
echo "== snippet through rgpu"
LD_LIBRARY_PATH=$PWD/$b/lib timeout 300 python3 -X faulthandler -c "import torch; $snippet" 2>&1 | tail -25
echo "== backtrace"
LD_LIBRARY_PATH=$PWD/$b/lib timeout 300 gdb -q -batch -ex run -ex bt -ex 'info sharedlibrary cublas' \
  --args python3 -c "import torch; $snippet" 2>&1 | grep -E '^#|signal|cublas' | head -40
echo "== which libraries name the tables"
python3 - "$@" <<'PY'
import ctypes, glob, os, sys, torch
uuids = [bytes.fromhex(u) for u in sys.argv[1:]]
roots = {os.path.dirname(torch.__file__)} | {p for p in glob.glob(os.path.join(os.path.dirname(os.path.dirname(torch.__file__)), "nvidia", "*"))}
for root in sorted(roots):
    for f in glob.glob(os.path.join(root, "**", "*.so*"), recursive=True):
        try: data = open(f, "rb").read()
        except OSError: continue
        hits = [u.hex() for u in uuids if u in data]
        if hits: print(f, hits)
cuda = ctypes.CDLL("libcuda.so.1")
cuda.cuInit(0)
for u in uuids:
    t = ctypes.c_void_p()
    rc = cuda.cuGetExportTable(ctypes.byref(t), ctypes.c_char_p(u))
    size = ctypes.c_uint64.from_address(t.value).value if rc == 0 and t.value else None
    print("native table", u.hex(), "rc", rc, "first word", size)
PY
kill $d
