// Messages of the drvlibs group (issue 12, for NVIDIA's libraries on rgpu's libcuda.so.1): tensor
// maps encoded by the server's driver, the potential block size occupancy search, and stream memory
// operations (wait/write value, batches).  Included from proto/messages.h; ids 0x0F80-0x0FBF
// (proto/catalogue.def).
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "proto/wire.h"

namespace rgpu::proto {

// ---- drvlibs
// cuTensorMapEncodeTiled (kind 0), cuTensorMapEncodeIm2col (1), cuTensorMapEncodeIm2colWide (2) on
// GPU `device`, every argument as the program gave it (enums by number).  `dims` has `rank`
// entries, `strides` rank - 1, `elem_strides` rank; `box` (tiled) rank; `lower`/`upper` (im2col)
// rank - 2 each, (im2col wide) one each.  The reply is the 128-byte CUtensorMap.
struct TensorMapEncodeReq {
  uint32_t device = 0;
  uint32_t kind = 0;
  uint32_t data_type = 0;
  uint32_t rank = 0;
  uint64_t address = 0;
  std::vector<uint64_t> dims;
  std::vector<uint64_t> strides;
  std::vector<uint32_t> box;
  std::vector<uint32_t> elem_strides;
  std::vector<int32_t> lower;
  std::vector<int32_t> upper;
  uint32_t channels = 0;  // channelsPerPixel (im2col)
  uint32_t pixels = 0;    // pixelsPerColumn (im2col)
  uint32_t interleave = 0;
  uint32_t swizzle = 0;
  uint32_t l2_promotion = 0;
  uint32_t oob_fill = 0;
  uint32_t mode = 0;  // CUtensorMapIm2ColWideMode (im2col wide)
  RGPU_FIELDS(device, kind, data_type, rank, address, dims, strides, box, elem_strides, lower,
              upper, channels, pixels, interleave, swizzle, l2_promotion, oob_fill, mode)
};
struct TensorMapRep {
  std::array<uint8_t, 128> map{};
  RGPU_FIELDS(map)
};
using TensorMapEncodeRep = TensorMapRep;

// cuTensorMapReplaceAddress: `map` with its global address replaced by `address`.
struct TensorMapReplaceReq {
  uint32_t device = 0;
  std::array<uint8_t, 128> map{};
  uint64_t address = 0;
  RGPU_FIELDS(device, map, address)
};
using TensorMapReplaceRep = TensorMapRep;

// cuOccupancyMaxPotentialBlockSizeWithFlags.  Without a table (the program gave no
// blockSizeToDynamicSMemSize callback) every block size uses `dynamic_smem` and the server's driver
// answers.  With one, `table` holds the callback's answer for every candidate block size (the
// client evaluated it) and the server runs the search with its occupancy calculator; a candidate
// the table lacks (the function allows fewer threads than the client assumed, and not a multiple
// of the warp size) comes back as `need`, with nothing else answered.
struct OccupancySmemEntry {
  int32_t block_size = 0;
  uint64_t smem = 0;
  RGPU_FIELDS(block_size, smem)
};
struct OccupancyBlockSizeReq {
  FuncReq func;
  uint32_t flags = 0;
  int32_t limit = 0;  // blockSizeLimit (0: none)
  uint64_t dynamic_smem = 0;
  uint8_t callback = 0;  // 1: `table` is the callback's answer
  std::vector<OccupancySmemEntry> table;
  RGPU_FIELDS(func, flags, limit, dynamic_smem, callback, table)
};
struct OccupancyBlockSizeRep {
  int32_t min_grid = 0;
  int32_t block_size = 0;
  int32_t need = 0;
  RGPU_FIELDS(min_grid, block_size, need)
};

// Stream memory operations (cuStreamWaitValue32/64, cuStreamWriteValue32/64, cuStreamBatchMemOp)
// on stream `stream` of GPU `device`, in order.  `op` is CUstreamBatchMemOpType's number; `flags`
// the operation's flags; `value` a 32- or 64-bit value.
struct MemOp {
  uint32_t op = 0;
  uint32_t flags = 0;
  uint64_t address = 0;
  uint64_t value = 0;
  RGPU_FIELDS(op, flags, address, value)
};
struct StreamMemOpReq {
  uint32_t device = 0;
  uint64_t stream = 0;
  std::vector<MemOp> ops;
  RGPU_FIELDS(device, stream, ops)
};
using StreamMemOpRep = Empty;

// cuLink*: a link state of GPU `device`, named by an id the client chose (LinkCreate), kept in the
// session; each input travels as the payload of LinkAddData (its driver adds it at once, so a bad
// input fails there); LinkComplete links and keeps the image, which LinkRead returns in pieces of
// at most kLinkReadBytes; LinkDestroy ends the state.
constexpr uint64_t kLinkReadBytes = 60000;
struct LinkReq {
  uint32_t device = 0;
  uint64_t link = 0;
  RGPU_FIELDS(device, link)
};
using LinkCreateReq = LinkReq;
using LinkCreateRep = Empty;
using LinkDestroyReq = LinkReq;
using LinkDestroyRep = Empty;
struct LinkAddDataReq {
  uint32_t device = 0;
  uint64_t link = 0;
  uint32_t type = 0;  // CUjitInputType
  std::string name;
  uint64_t size = 0;
  RGPU_FIELDS(device, link, type, name, size)
  uint64_t payload_bytes() const { return size; }
};
using LinkAddDataRep = Empty;
using LinkCompleteReq = LinkReq;
struct LinkCompleteRep {
  uint64_t size = 0;
  RGPU_FIELDS(size)
};
struct LinkReadReq {
  uint32_t device = 0;
  uint64_t link = 0;
  uint64_t offset = 0;
  RGPU_FIELDS(device, link, offset)
};
struct LinkReadRep {
  std::vector<uint8_t> bytes;
  RGPU_FIELDS(bytes)
};

}  // namespace rgpu::proto
