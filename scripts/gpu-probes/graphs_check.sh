#!/usr/bin/env bash
# Test programs (graphs by default) natively, through rgpu's runtime (TCP) and through NVIDIA's runtime on
# rgpu's driver, outputs compared with native's (the CUDA behaviour the tests assert).
#   scripts/gpu-probes/graphs_check.sh [BUILD_DIR] [PROGRAM...]
cd "$(dirname "$0")/../.."
b=${1:-build-gpu}
shift
progs=("${@:-graphs_more driver_graphs graphs_mem}")
o=$(mktemp -d)
$b/server/rgpud --backend cuda --listen 127.0.0.1:0 --port-file $o/port 2>$o/rgpud.log &
d=$!
trap 'kill $d 2>/dev/null; wait $d 2>/dev/null' EXIT
for _ in $(seq 100); do [ -s $o/port ] && break; sleep 0.1; done
mkdir -p $o/nvrt
ln -sf /usr/local/cuda/lib64/libcudart.so.13 $o/nvrt/libcudart.so.13
ln -sf $PWD/$b/lib/libcuda.so.1 $o/nvrt/libcuda.so.1
export RGPU_SERVERS=127.0.0.1:$(cat $o/port)
for p in ${progs[*]}; do
  LD_LIBRARY_PATH=/usr/local/cuda/lib64 timeout 60 $b/cuda/$p >$o/$p.native 2>$o/$p.native.err; n=$?
  CUDA_VISIBLE_DEVICES=-1 RGPU_TRANSPORT=tcp LD_LIBRARY_PATH=$PWD/$b/lib timeout 60 $b/cuda/$p >$o/$p.rgpu 2>$o/$p.rgpu.err; r=$?
  CUDA_VISIBLE_DEVICES=-1 LD_LIBRARY_PATH=$o/nvrt timeout 60 $b/cuda/$p >$o/$p.nvrt 2>$o/$p.nvrt.err; v=$?
  same=identical
  diff $o/$p.native $o/$p.rgpu >$o/$p.diff || same=DIFFERENT
  diff $o/$p.native $o/$p.nvrt >>$o/$p.diff || same=DIFFERENT
  echo "graphs_check $p: native rc=$n, rgpu rc=$r, nvrt rc=$v, $same"
  grep '^FAIL' $o/$p.native | head -5
  [ $same = identical ] || head -20 $o/$p.diff
done
# One synchronous call by the runtime and by the driver API (issue 12's target), three ways.
if [ -x $b/cuda/sync_call ]; then
  echo "sync_call native: $(LD_LIBRARY_PATH=/usr/local/cuda/lib64 timeout 60 $b/cuda/sync_call | tr '\n' ' ')"
  echo "sync_call rgpu tcp: $(CUDA_VISIBLE_DEVICES=-1 RGPU_TRANSPORT=tcp LD_LIBRARY_PATH=$PWD/$b/lib timeout 60 $b/cuda/sync_call | tr '\n' ' ')"
  echo "sync_call rgpu shm: $(CUDA_VISIBLE_DEVICES=-1 RGPU_TRANSPORT=shm LD_LIBRARY_PATH=$PWD/$b/lib timeout 60 $b/cuda/sync_call | tr '\n' ' ')"
  echo "sync_call nvrt shm: $(CUDA_VISIBLE_DEVICES=-1 RGPU_TRANSPORT=shm LD_LIBRARY_PATH=$o/nvrt timeout 60 $b/cuda/sync_call | tr '\n' ' ')"
fi
