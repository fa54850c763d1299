// The drvlibs group (issue 12, the driver calls NVIDIA's libraries need): tensor maps encoded by
// the backend's driver, the potential block size search (with the client's table of a callback's
// answers), and stream memory operations on the session's streams.  Every array is checked against
// the rank before the backend (and the driver, which reads `rank` entries) sees it, and every
// address of a memory operation against the session's memory.
#include <algorithm>
#include <map>
#include <string>

#include "common/log.h"
#include "server/session.h"

namespace rgpu::server {

using namespace rgpu::proto;
using Status = backend::Status;

namespace {

constexpr uint32_t kWait32 = 1, kWrite32 = 2, kFlush = 3, kWait64 = 4, kWrite64 = 5, kBarrier = 6;
constexpr uint32_t kWaitFlush = 1u << 30;
constexpr CudaError kCaptureUnsupported = 900;

Status bad(const std::string& m) { return Status::fail(err::InvalidValue, m); }

}  // namespace

Status Session::on(TensorMapEncodeMsg, const TensorMapEncodeReq& q, TensorMapEncodeRep& rep) {
  if (Status s = check_device(q.device); !s.ok()) return s;
  if (q.kind > 2) return bad("tensor map: unknown encoding " + std::to_string(q.kind));
  const uint32_t min_rank = q.kind == 0 ? 1 : 3;
  if (q.rank < min_rank || q.rank > 5)
    return bad("tensor map: rank " + std::to_string(q.rank) + " (must be " +
               std::to_string(min_rank) + " to 5)");
  const size_t corners = q.kind == 0 ? 0 : q.kind == 1 ? q.rank - 2 : 1;
  if (q.dims.size() != q.rank || q.strides.size() != q.rank - 1 ||
      q.elem_strides.size() != q.rank || q.box.size() != (q.kind == 0 ? q.rank : 0) ||
      q.lower.size() != corners || q.upper.size() != corners)
    return bad("tensor map: the arrays do not match rank " + std::to_string(q.rank));
  backend::Executor::TensorMapArgs a;
  a.kind = q.kind, a.data_type = q.data_type, a.rank = q.rank, a.address = q.address;
  a.dims = q.dims, a.strides = q.strides, a.box = q.box, a.elem_strides = q.elem_strides;
  a.lower = q.lower, a.upper = q.upper;
  a.channels = q.channels, a.pixels = q.pixels, a.interleave = q.interleave;
  a.swizzle = q.swizzle, a.l2_promotion = q.l2_promotion, a.oob_fill = q.oob_fill, a.mode = q.mode;
  uint8_t map[128] = {};
  if (Status s = exec_.tensor_map_encode(static_cast<int>(q.device), a, map); !s.ok()) return s;
  std::copy(std::begin(map), std::end(map), rep.map.begin());
  return Status::success();
}

Status Session::on(TensorMapReplaceMsg, const TensorMapReplaceReq& q, TensorMapReplaceRep& rep) {
  if (Status s = check_device(q.device); !s.ok()) return s;
  uint8_t map[128];
  std::copy(q.map.begin(), q.map.end(), map);
  if (Status s = exec_.tensor_map_replace_address(static_cast<int>(q.device), map, q.address);
      !s.ok())
    return s;
  std::copy(std::begin(map), std::end(map), rep.map.begin());
  return Status::success();
}

Status Session::on(OccupancyBlockSizeMsg, const OccupancyBlockSizeReq& q,
                   OccupancyBlockSizeRep& rep) {
  uint64_t kernel = 0;
  if (Status s = find_kernel(q.func, kernel); !s.ok()) return s;
  if (q.limit < 0) return bad("negative block size limit");
  const int dev = static_cast<int>(q.func.device);
  if (!q.callback)
    return exec_.occupancy_block_size(dev, kernel, q.dynamic_smem, q.limit, q.flags, rep.min_grid,
                                      rep.block_size);
  std::map<int32_t, uint64_t> table;
  for (const OccupancySmemEntry& e : q.table) table[e.block_size] = e.smem;
  return backend::occupancy_search(
      exec_, dev, kernel, q.limit, q.flags,
      [&](int32_t bs, uint64_t& smem) {
        auto it = table.find(bs);
        if (it == table.end()) return false;
        smem = it->second;
        return true;
      },
      rep.min_grid, rep.block_size, rep.need);
}

Status Session::on(StreamMemOpMsg, const StreamMemOpReq& q, Empty&) {
  uint64_t stream = 0;
  if (Status s = stream_of(q.device, q.stream, stream); !s.ok()) return s;
  if (q.ops.empty()) return bad("a batch of no stream memory operations");
  if (graphs_.streams.count(q.stream))
    return Status::fail(kCaptureUnsupported,
                        "stream memory operations cannot be captured into a graph by rgpu yet");
  std::vector<backend::Executor::MemOp> ops;
  ops.reserve(q.ops.size());
  for (const MemOp& o : q.ops) {
    const bool wait = o.op == kWait32 || o.op == kWait64;
    const bool write = o.op == kWrite32 || o.op == kWrite64;
    if (wait || write) {
      const uint64_t size = o.op == kWait64 || o.op == kWrite64 ? 8 : 4;
      if (o.address % size)
        return bad("stream memory operation at " + std::to_string(o.address) + ": not " +
                   std::to_string(size) + "-byte aligned");
      if (wait && (o.flags & ~kWaitFlush) > 3)
        return bad("unknown stream wait flags " + std::to_string(o.flags));
      if (write && o.flags > 1) return bad("unknown stream write flags " + std::to_string(o.flags));
      if (!memop_address_ok(q.device, o.address, size))
        return bad(
            "stream memory operation: address is not inside device memory or mapped "
            "page-locked memory of this session");
    } else if (o.op == kFlush) {
      if (o.flags) return bad("a flush of remote writes takes no flags");
    } else if (o.op == kBarrier) {
      if (o.flags > 1) return bad("unknown memory barrier scope " + std::to_string(o.flags));
    } else {
      return bad("unknown stream memory operation " + std::to_string(o.op));
    }
    ops.push_back({o.op, o.flags, o.address, o.value});
  }
  return exec_.stream_mem_ops(static_cast<int>(q.device), stream, ops);
}

bool Session::memop_address_ok(uint32_t dev, uint64_t address, uint64_t size) const {
  if (allocs_[dev].contains(address, size)) return true;
  // Mapped page-locked memory: a client segment the session mapped at the program's address.
  for (const auto& [id, seg] : shared_) {
    const auto base = reinterpret_cast<uint64_t>(seg.base);
    if (address >= base && size <= seg.size && address - base <= seg.size - size) return true;
  }
  return false;
}

}  // namespace rgpu::server
