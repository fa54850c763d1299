// The drvlibs group's client core (issue 12, for NVIDIA's libraries): tensor maps (encoded by the
// server's driver; the 128 bytes come back), the potential block size search with the program's
// callback evaluated here, and stream memory operations sent in stream order (server/drvlibs.cc).
#include <algorithm>
#include <cstring>

#include "client/client.h"
#include "common/log.h"

namespace rgpu::client {

using namespace rgpu::proto;

namespace {
constexpr uint32_t kMaxThreadsPerBlock = 1, kWarpSize = 10;
}  // namespace

CudaError Client::tensor_map_encode(const TensorMapSpec& s, uint8_t (&map)[128]) {
  TensorMapEncodeReq q;
  q.kind = s.kind, q.data_type = s.data_type, q.rank = s.rank, q.address = s.address;
  q.dims = s.dims, q.strides = s.strides, q.box = s.box, q.elem_strides = s.elem_strides;
  q.lower = s.lower, q.upper = s.upper;
  q.channels = s.channels, q.pixels = s.pixels, q.interleave = s.interleave;
  q.swizzle = s.swizzle, q.l2_promotion = s.l2_promotion, q.oob_fill = s.oob_fill, q.mode = s.mode;
  TensorMapEncodeRep rep;
  if (Error e = forward<TensorMapEncodeMsg>(current_device(), q, &rep); e != err::Success) return e;
  std::memcpy(map, rep.map.data(), 128);
  return err::Success;
}

CudaError Client::tensor_map_replace_address(uint8_t (&map)[128], uint64_t address) {
  TensorMapReplaceReq q;
  std::memcpy(q.map.data(), map, 128);
  q.address = address;
  TensorMapReplaceRep rep;
  if (Error e = forward<TensorMapReplaceMsg>(current_device(), q, &rep); e != err::Success)
    return e;
  std::memcpy(map, rep.map.data(), 128);
  return err::Success;
}

CudaError Client::occupancy_block_size(const Function* f, const std::function<size_t(int)>& smem_of,
                                       size_t dynamic_smem, int limit, unsigned flags,
                                       int* min_grid, int* block_size) {
  if (!min_grid || !block_size || limit < 0) return err::InvalidValue;
  const int dev = current_device();
  const KernelInfo* k = nullptr;
  ServerLink* l = nullptr;
  OccupancyBlockSizeReq q;
  if (CudaError e = kernel_on(f, dev, &l, &q.func, &k); e != err::Success) return e;
  q.flags = flags;
  q.limit = limit;
  q.dynamic_smem = dynamic_smem;
  if (smem_of) {
    // The candidates the search can ask for (occupancy_search in backend/executor.h): the largest
    // block the device and `limit` allow, then each smaller multiple of the warp size.  The
    // function may allow fewer threads: the server names a size it lacks and it is added.
    const DeviceInfo* info = nullptr;
    if (CudaError e = device_info(dev, &info); e != err::Success) return e;
    const int warp = info->attr(kWarpSize, 32);
    int top = info->attr(kMaxThreadsPerBlock, 1024);
    if (limit > 0) top = std::min(top, limit);
    if (warp <= 0 || top <= 0) return err::InvalidValue;
    q.callback = 1;
    for (int aligned = (top + warp - 1) / warp * warp; aligned > 0; aligned -= warp) {
      const int bs = std::min(top, aligned);
      q.table.push_back({bs, static_cast<uint64_t>(smem_of(bs))});
    }
  }
  OccupancyBlockSizeRep rep;
  for (int round = 0; round < 2; ++round) {
    if (CudaError e = l->call<OccupancyBlockSizeMsg>(q, &rep); e != err::Success) return e;
    if (!rep.need) break;
    if (round == 1 || rep.need < 0 || !smem_of) {
      LOG_ERROR("cuOccupancyMaxPotentialBlockSize: the server asked for block size %d twice",
                rep.need);
      return err::Unknown;
    }
    q.table.push_back({rep.need, static_cast<uint64_t>(smem_of(rep.need))});
  }
  *min_grid = rep.min_grid;
  *block_size = rep.block_size;
  return err::Success;
}

CudaError Client::stream_mem_ops(const Stream& s, const std::vector<MemOp>& ops) {
  if (ops.empty()) return err::InvalidValue;
  StreamMemOpReq q;
  q.stream = s.id;
  for (const MemOp& o : ops) {
    if (o.address) {
      // Stream memory operations are how the host and a running stream signal each other: managed
      // memory standing in for mapped page-locked memory over a network cannot carry that.
      if (emulated_mapped(reinterpret_cast<const void*>(o.address), nullptr, nullptr)) {
        if (first_time("stream memory operation on emulated mapped memory"))
          LOG_ERROR(
              "stream memory operation at 0x%llx: this mapped page-locked memory is emulated (the "
              "server is across the network), so the host and the GPU cannot signal through it "
              "while work runs; use device memory, or a server on this machine over shm",
              static_cast<unsigned long long>(o.address));
        return err::NotSupported;
      }
      // The GPU must reach the word: device memory, or page-locked memory mapped for it.
      const PointerInfo pi = pointer_info(reinterpret_cast<const void*>(o.address));
      const bool ok = (pi.type == MemoryType::Device && pi.device == s.device) ||
                      (pi.type == MemoryType::Host && pi.mapped);
      if (!ok) {
        LOG_ERROR(
            "stream memory operation at 0x%llx: not device memory of the stream's device or "
            "mapped page-locked memory",
            static_cast<unsigned long long>(o.address));
        return err::InvalidValue;
      }
    }
    q.ops.push_back({o.op, o.flags, o.address, o.value});
  }
  return forward<StreamMemOpMsg>(s.device, q);
}

}  // namespace rgpu::client
