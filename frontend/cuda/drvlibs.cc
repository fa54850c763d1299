// Driver calls NVIDIA's libraries need (issue 12, drvlibs): tensor maps (encoded by the server's
// driver; device addresses are the same on both sides, so the descriptor is valid there), the
// potential block size occupancy query (the program's callback is evaluated here, the search runs
// on the server), and stream memory operations (forwarded in stream order).  Arguments are checked
// here as far as cuda.h documents them; the server's driver checks the rest.
#include <climits>
#include <cstring>
#include <mutex>
#include <set>
#include <string>
#include <vector>

#include "common/log.h"
#include "frontend/cuda/api.h"

using namespace rgpu;
using rgpu::cuda_fe::core;
using rgpu::cuda_fe::function_of;
using rgpu::cuda_fe::to_driver;
using Spec = client::Client::TensorMapSpec;
using MemOp = client::Client::MemOp;

namespace {

// ---- tensor maps ---------------------------------------------------------------------------

bool packed_16b(uint32_t t) {
  return t == CU_TENSOR_MAP_DATA_TYPE_16U4_ALIGN16B || t == CU_TENSOR_MAP_DATA_TYPE_16U6_ALIGN16B;
}

// CUDA_ERROR_INVALID_VALUE for a tensor map, logged once per reason: programs that build tensor
// maps (XLA, Triton) tend to report only the code.
CUresult refuse(const char* why, uint64_t value) {
  static std::mutex mu;
  static std::set<std::string> seen;
  {
    std::lock_guard<std::mutex> lock(mu);
    if (!seen.insert(why).second) return CUDA_ERROR_INVALID_VALUE;
  }
  LOG_WARN("cuTensorMapEncode*: %s is out of range (%llu) (CUDA_ERROR_INVALID_VALUE)", why,
           static_cast<unsigned long long>(value));
  return CUDA_ERROR_INVALID_VALUE;
}

// What cuda.h states about every encoding: ranks, enum ranges, alignment, null arrays, and the
// documented bounds of dimensions, strides and element strides.
CUresult check_common(const Spec& s, const cuuint64_t* dims, const cuuint64_t* strides,
                      const cuuint32_t* elem) {
  const uint32_t min_rank = s.kind == 0 ? 1 : 3;
  if (s.rank < min_rank || s.rank > 5) return refuse("rank", s.rank);
  if (s.interleave != CU_TENSOR_MAP_INTERLEAVE_NONE && s.rank < 3)
    return refuse("interleave below rank 3", s.rank);
  if (s.data_type > CU_TENSOR_MAP_DATA_TYPE_16U6_ALIGN16B)
    return refuse("the data type", s.data_type);
  if (s.interleave > CU_TENSOR_MAP_INTERLEAVE_32B) return refuse("the interleave", s.interleave);
  if (s.swizzle > CU_TENSOR_MAP_SWIZZLE_128B_ATOM_64B) return refuse("the swizzle", s.swizzle);
  if (s.l2_promotion > CU_TENSOR_MAP_L2_PROMOTION_L2_256B)
    return refuse("the L2 promotion", s.l2_promotion);
  if (s.oob_fill > CU_TENSOR_MAP_FLOAT_OOB_FILL_NAN_REQUEST_ZERO_FMA)
    return refuse("the out-of-bounds fill", s.oob_fill);
  if (s.interleave == CU_TENSOR_MAP_INTERLEAVE_32B && s.swizzle != CU_TENSOR_MAP_SWIZZLE_32B)
    return refuse("32-byte interleave without 32-byte swizzle", s.swizzle);
  const uint64_t align =
      s.interleave == CU_TENSOR_MAP_INTERLEAVE_32B || packed_16b(s.data_type) ? 32 : 16;
  if (s.address % align) return refuse("global address alignment", s.address);
  if (!dims || !elem || (s.rank > 1 && !strides)) return refuse("a null array", 0);
  for (uint32_t i = 0; i < s.rank; ++i) {
    if (dims[i] == 0 || dims[i] > (1ull << 32)) return refuse("a global dimension", dims[i]);
    if (elem[i] == 0 || elem[i] > 8) return refuse("an element stride", elem[i]);
  }
  const uint64_t stride_align =
      s.interleave == CU_TENSOR_MAP_INTERLEAVE_32B || packed_16b(s.data_type) ? 32 : 16;
  for (uint32_t i = 0; i + 1 < s.rank; ++i)
    if (strides[i] % stride_align || strides[i] >= (1ull << 40))
      return refuse("a global stride", strides[i]);
  return CUDA_SUCCESS;
}

void fill_arrays(Spec& s, const cuuint64_t* dims, const cuuint64_t* strides,
                 const cuuint32_t* elem) {
  s.dims.assign(dims, dims + s.rank);
  if (s.rank > 1) s.strides.assign(strides, strides + s.rank - 1);
  s.elem_strides.assign(elem, elem + s.rank);
}

CUresult encode(CUtensorMap* map, const Spec& s) {
  uint8_t out[128];
  if (CUresult r = to_driver(core().tensor_map_encode(s, out)); r != CUDA_SUCCESS) return r;
  std::memcpy(map, out, sizeof out);
  return CUDA_SUCCESS;
}

// The context the call runs in: INVALID_CONTEXT without a current one.
CUresult have_context() {
  int dev = 0;
  return to_driver(cuda_fe::current_device(&dev));
}

Spec base(uint32_t kind, CUtensorMapDataType type, cuuint32_t rank, void* address,
          CUtensorMapInterleave il, CUtensorMapSwizzle sw, CUtensorMapL2promotion l2,
          CUtensorMapFloatOOBfill oob) {
  Spec s;
  s.kind = kind;
  s.data_type = static_cast<uint32_t>(type);
  s.rank = rank;
  s.address = reinterpret_cast<uintptr_t>(address);
  s.interleave = static_cast<uint32_t>(il);
  s.swizzle = static_cast<uint32_t>(sw);
  s.l2_promotion = static_cast<uint32_t>(l2);
  s.oob_fill = static_cast<uint32_t>(oob);
  return s;
}

// ---- occupancy -------------------------------------------------------------------------------

CUresult block_size(int* min_grid, int* block, CUfunction func, CUoccupancyB2DSize smem_of,
                    size_t smem, int limit, unsigned flags) {
  RGPU_INIT();
  if (!min_grid || !block || limit < 0) return CUDA_ERROR_INVALID_VALUE;
  if (flags & ~unsigned(CU_OCCUPANCY_DISABLE_CACHING_OVERRIDE)) return CUDA_ERROR_INVALID_VALUE;
  if (!func) return CUDA_ERROR_INVALID_HANDLE;
  client::Function* f = function_of(func);
  if (!f) return CUDA_ERROR_INVALID_HANDLE;
  if (CUresult r = have_context(); r != CUDA_SUCCESS) return r;
  std::function<size_t(int)> fn;
  if (smem_of) fn = [smem_of](int bs) { return smem_of(bs); };
  return to_driver(core().occupancy_block_size(f, fn, smem, limit, flags, min_grid, block));
}

// ---- stream memory operations ----------------------------------------------------------------

// `v1`: an entry point of the first API, which a device supports only where it says so
// (CU_DEVICE_ATTRIBUTE_CAN_USE_STREAM_MEM_OPS_V1; current GPUs answer 0).
CUresult mem_ops(CUstream st, bool pt, const std::vector<MemOp>& ops, bool v1) {
  RGPU_INIT();
  client::Stream s;
  if (client::Error e = cuda_fe::stream_of(st, pt, &s); e != err::Success) return to_driver(e);
  if (v1) {
    const client::DeviceInfo* info = nullptr;
    if (CUresult r = to_driver(core().device_info(s.device, &info)); r != CUDA_SUCCESS) return r;
    if (!info->attr(CU_DEVICE_ATTRIBUTE_CAN_USE_STREAM_MEM_OPS_V1)) return CUDA_ERROR_NOT_SUPPORTED;
  }
  return to_driver(core().stream_mem_ops(s, ops));
}

// A wait's flags: one of GEQ, EQ, AND, NOR, optionally with FLUSH.
bool wait_flags_ok(unsigned flags) {
  return (flags & ~unsigned(CU_STREAM_WAIT_VALUE_FLUSH)) <= CU_STREAM_WAIT_VALUE_NOR;
}

CUresult wait_value(CUstream st, CUdeviceptr addr, uint64_t value, unsigned flags, bool wide,
                    bool pt, bool v1) {
  if (!addr || addr % (wide ? 8 : 4) || !wait_flags_ok(flags)) return CUDA_ERROR_INVALID_VALUE;
  MemOp o;
  o.op = wide ? CU_STREAM_MEM_OP_WAIT_VALUE_64 : CU_STREAM_MEM_OP_WAIT_VALUE_32;
  o.flags = flags;
  o.address = addr;
  o.value = value;
  return mem_ops(st, pt, {o}, v1);
}

// `v1`: the first API, which also took CU_STREAM_WRITE_VALUE_NO_MEMORY_BARRIER (it only allows
// reordering, so the write is sent with the barrier); the _v2 API refuses it.
CUresult write_value(CUstream st, CUdeviceptr addr, uint64_t value, unsigned flags, bool wide,
                     bool pt, bool v1) {
  if (!addr || addr % (wide ? 8 : 4)) return CUDA_ERROR_INVALID_VALUE;
  if (flags & ~unsigned(CU_STREAM_WRITE_VALUE_NO_MEMORY_BARRIER)) return CUDA_ERROR_INVALID_VALUE;
  if (flags && !v1) return CUDA_ERROR_INVALID_VALUE;
  MemOp o;
  o.op = wide ? CU_STREAM_MEM_OP_WRITE_VALUE_64 : CU_STREAM_MEM_OP_WRITE_VALUE_32;
  o.address = addr;
  o.value = value;
  return mem_ops(st, pt, {o}, v1);
}

CUresult batch(CUstream st, unsigned count, CUstreamBatchMemOpParams* p, unsigned flags, bool pt,
               bool v1) {
  if (count == 0 || count >= 256 || !p || flags) return CUDA_ERROR_INVALID_VALUE;
  std::vector<MemOp> ops(count);
  for (unsigned i = 0; i < count; ++i) {
    int type;  // the number the program stored: it may be no enumerator
    std::memcpy(&type, &p[i].operation, sizeof type);
    MemOp& o = ops[i];
    o.op = static_cast<uint32_t>(type);
    switch (type) {
      case CU_STREAM_MEM_OP_WAIT_VALUE_32:
      case CU_STREAM_MEM_OP_WAIT_VALUE_64:
        o.address = p[i].waitValue.address;
        o.value =
            type == CU_STREAM_MEM_OP_WAIT_VALUE_64 ? p[i].waitValue.value64 : p[i].waitValue.value;
        o.flags = p[i].waitValue.flags;
        if (!o.address || o.address % (type == CU_STREAM_MEM_OP_WAIT_VALUE_64 ? 8 : 4) ||
            !wait_flags_ok(o.flags))
          return CUDA_ERROR_INVALID_VALUE;
        break;
      case CU_STREAM_MEM_OP_WRITE_VALUE_32:
      case CU_STREAM_MEM_OP_WRITE_VALUE_64:
        o.address = p[i].writeValue.address;
        o.value = type == CU_STREAM_MEM_OP_WRITE_VALUE_64 ? p[i].writeValue.value64
                                                          : p[i].writeValue.value;
        if (!o.address || o.address % (type == CU_STREAM_MEM_OP_WRITE_VALUE_64 ? 8 : 4) ||
            p[i].writeValue.flags > (v1 ? 1u : 0u))
          return CUDA_ERROR_INVALID_VALUE;
        o.flags = 0;  // the first API's NO_MEMORY_BARRIER only allows reordering
        break;
      case CU_STREAM_MEM_OP_FLUSH_REMOTE_WRITES:
        if (p[i].flushRemoteWrites.flags) return CUDA_ERROR_INVALID_VALUE;
        break;
      case CU_STREAM_MEM_OP_BARRIER:
        if (v1 || p[i].memoryBarrier.flags > CU_STREAM_MEMORY_BARRIER_TYPE_GPU)
          return CUDA_ERROR_INVALID_VALUE;  // barriers exist in the _v2 API only
        o.flags = p[i].memoryBarrier.flags;
        break;
      default:
        LOG_ERROR("cuStreamBatchMemOp: operation %d is unknown to rgpu (CUDA_ERROR_INVALID_VALUE)",
                  type);
        return CUDA_ERROR_INVALID_VALUE;
    }
  }
  return mem_ops(st, pt, ops, v1);
}

}  // namespace

// ---- tensor maps ---------------------------------------------------------------------------

RGPU_CU CUresult cuTensorMapEncodeTiled(
    CUtensorMap* tensorMap, CUtensorMapDataType tensorDataType, cuuint32_t tensorRank,
    void* globalAddress, const cuuint64_t* globalDim, const cuuint64_t* globalStrides,
    const cuuint32_t* boxDim, const cuuint32_t* elementStrides, CUtensorMapInterleave interleave,
    CUtensorMapSwizzle swizzle, CUtensorMapL2promotion l2Promotion,
    CUtensorMapFloatOOBfill oobFill) {
  RGPU_INIT();
  if (!tensorMap) return CUDA_ERROR_INVALID_VALUE;
  Spec s =
      base(0, tensorDataType, tensorRank, globalAddress, interleave, swizzle, l2Promotion, oobFill);
  if (CUresult r = check_common(s, globalDim, globalStrides, elementStrides); r != CUDA_SUCCESS)
    return r;
  if (!boxDim) return CUDA_ERROR_INVALID_VALUE;
  for (uint32_t i = 0; i < tensorRank; ++i)
    if (boxDim[i] == 0 || boxDim[i] > 256) return refuse("a box dimension", boxDim[i]);
  if (CUresult r = have_context(); r != CUDA_SUCCESS) return r;
  fill_arrays(s, globalDim, globalStrides, elementStrides);
  s.box.assign(boxDim, boxDim + tensorRank);
  return encode(tensorMap, s);
}

RGPU_CU CUresult cuTensorMapEncodeIm2col(
    CUtensorMap* tensorMap, CUtensorMapDataType tensorDataType, cuuint32_t tensorRank,
    void* globalAddress, const cuuint64_t* globalDim, const cuuint64_t* globalStrides,
    const int* pixelBoxLowerCorner, const int* pixelBoxUpperCorner, cuuint32_t channelsPerPixel,
    cuuint32_t pixelsPerColumn, const cuuint32_t* elementStrides, CUtensorMapInterleave interleave,
    CUtensorMapSwizzle swizzle, CUtensorMapL2promotion l2Promotion,
    CUtensorMapFloatOOBfill oobFill) {
  RGPU_INIT();
  if (!tensorMap) return CUDA_ERROR_INVALID_VALUE;
  Spec s =
      base(1, tensorDataType, tensorRank, globalAddress, interleave, swizzle, l2Promotion, oobFill);
  if (CUresult r = check_common(s, globalDim, globalStrides, elementStrides); r != CUDA_SUCCESS)
    return r;
  if (!pixelBoxLowerCorner || !pixelBoxUpperCorner) return CUDA_ERROR_INVALID_VALUE;
  if (CUresult r = have_context(); r != CUDA_SUCCESS) return r;
  fill_arrays(s, globalDim, globalStrides, elementStrides);
  s.lower.assign(pixelBoxLowerCorner, pixelBoxLowerCorner + tensorRank - 2);
  s.upper.assign(pixelBoxUpperCorner, pixelBoxUpperCorner + tensorRank - 2);
  s.channels = channelsPerPixel;
  s.pixels = pixelsPerColumn;
  return encode(tensorMap, s);
}

RGPU_CU CUresult cuTensorMapEncodeIm2colWide(
    CUtensorMap* tensorMap, CUtensorMapDataType tensorDataType, cuuint32_t tensorRank,
    void* globalAddress, const cuuint64_t* globalDim, const cuuint64_t* globalStrides,
    int pixelBoxLowerCornerWidth, int pixelBoxUpperCornerWidth, cuuint32_t channelsPerPixel,
    cuuint32_t pixelsPerColumn, const cuuint32_t* elementStrides, CUtensorMapInterleave interleave,
    CUtensorMapIm2ColWideMode mode, CUtensorMapSwizzle swizzle, CUtensorMapL2promotion l2Promotion,
    CUtensorMapFloatOOBfill oobFill) {
  RGPU_INIT();
  if (!tensorMap) return CUDA_ERROR_INVALID_VALUE;
  Spec s =
      base(2, tensorDataType, tensorRank, globalAddress, interleave, swizzle, l2Promotion, oobFill);
  if (CUresult r = check_common(s, globalDim, globalStrides, elementStrides); r != CUDA_SUCCESS)
    return r;
  int m;
  std::memcpy(&m, &mode, sizeof m);
  if (m < CU_TENSOR_MAP_IM2COL_WIDE_MODE_W || m > CU_TENSOR_MAP_IM2COL_WIDE_MODE_W128)
    return CUDA_ERROR_INVALID_VALUE;
  if (CUresult r = have_context(); r != CUDA_SUCCESS) return r;
  fill_arrays(s, globalDim, globalStrides, elementStrides);
  s.lower = {pixelBoxLowerCornerWidth};
  s.upper = {pixelBoxUpperCornerWidth};
  s.channels = channelsPerPixel;
  s.pixels = pixelsPerColumn;
  s.mode = static_cast<uint32_t>(m);
  return encode(tensorMap, s);
}

RGPU_CU CUresult cuTensorMapReplaceAddress(CUtensorMap* tensorMap, void* globalAddress) {
  RGPU_INIT();
  if (!tensorMap || reinterpret_cast<uintptr_t>(globalAddress) % 16)
    return CUDA_ERROR_INVALID_VALUE;
  if (CUresult r = have_context(); r != CUDA_SUCCESS) return r;
  uint8_t map[128];
  std::memcpy(map, tensorMap, sizeof map);
  if (CUresult r = to_driver(
          core().tensor_map_replace_address(map, reinterpret_cast<uintptr_t>(globalAddress)));
      r != CUDA_SUCCESS)
    return r;
  std::memcpy(tensorMap, map, sizeof map);
  return CUDA_SUCCESS;
}

// ---- occupancy -------------------------------------------------------------------------------

RGPU_CU CUresult cuOccupancyMaxPotentialBlockSizeWithFlags(int* minGridSize, int* blockSize,
                                                           CUfunction func,
                                                           CUoccupancyB2DSize smemOf,
                                                           size_t dynamicSMemSize,
                                                           int blockSizeLimit, unsigned int flags) {
  return block_size(minGridSize, blockSize, func, smemOf, dynamicSMemSize, blockSizeLimit, flags);
}
RGPU_CU CUresult cuOccupancyMaxPotentialBlockSize(int* minGridSize, int* blockSize, CUfunction func,
                                                  CUoccupancyB2DSize smemOf, size_t dynamicSMemSize,
                                                  int blockSizeLimit) {
  return block_size(minGridSize, blockSize, func, smemOf, dynamicSMemSize, blockSizeLimit, 0);
}

// ---- stream memory operations ----------------------------------------------------------------
// The _v2 names are what cuda.h maps the plain names to; the plain names are the first API (same
// arguments); _ptsz reads stream 0 as the calling thread's stream.
#define RGPU_MEMOPS(SUFFIX, PT, V1)                                                              \
  RGPU_CU CUresult cuStreamWaitValue32##SUFFIX(CUstream st, CUdeviceptr addr, cuuint32_t value,  \
                                               unsigned int flags) {                             \
    return wait_value(st, addr, value, flags, false, PT, V1);                                    \
  }                                                                                              \
  RGPU_CU CUresult cuStreamWaitValue64##SUFFIX(CUstream st, CUdeviceptr addr, cuuint64_t value,  \
                                               unsigned int flags) {                             \
    return wait_value(st, addr, value, flags, true, PT, V1);                                     \
  }                                                                                              \
  RGPU_CU CUresult cuStreamWriteValue32##SUFFIX(CUstream st, CUdeviceptr addr, cuuint32_t value, \
                                                unsigned int flags) {                            \
    return write_value(st, addr, value, flags, false, PT, V1);                                   \
  }                                                                                              \
  RGPU_CU CUresult cuStreamWriteValue64##SUFFIX(CUstream st, CUdeviceptr addr, cuuint64_t value, \
                                                unsigned int flags) {                            \
    return write_value(st, addr, value, flags, true, PT, V1);                                    \
  }                                                                                              \
  RGPU_CU CUresult cuStreamBatchMemOp##SUFFIX(CUstream st, unsigned int count,                   \
                                              CUstreamBatchMemOpParams* p, unsigned int flags) { \
    return batch(st, count, p, flags, PT, V1);                                                   \
  }

#undef cuStreamWaitValue32
#undef cuStreamWaitValue64
#undef cuStreamWriteValue32
#undef cuStreamWriteValue64
#undef cuStreamBatchMemOp
RGPU_MEMOPS(, false, true)
RGPU_MEMOPS(_ptsz, true, true)
RGPU_MEMOPS(_v2, false, false)
RGPU_MEMOPS(_v2_ptsz, true, false)
#undef RGPU_MEMOPS
