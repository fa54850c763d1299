#include "backend/cuda/cuda_drvlibs.h"

#include <dlfcn.h>

#include <cstring>
#include <string>

namespace rgpu::backend {
namespace {

// The entry point `name` of the library CudaDriver::load chose, or null.
template <class Fn>
Fn driver_fn(const CudaDriver& drv, const char* name) {
  return drv.handle ? reinterpret_cast<Fn>(dlsym(drv.handle, name)) : nullptr;
}

Status missing(const char* name) {
  return Status::fail(err::NotSupported, std::string("the server's NVIDIA driver lacks ") + name);
}

Status result(const CudaDriver& drv, CUresult r, const char* what) {
  if (r == CUDA_SUCCESS) return Status::success();
  // CUresult and cudaError_t share their numbers for every code these calls return.
  return Status::fail(static_cast<CudaError>(r), std::string(what) + ": " + drv.describe(r));
}

using TiledFn = CUresult (*)(CUtensorMap*, CUtensorMapDataType, cuuint32_t, void*,
                             const cuuint64_t*, const cuuint64_t*, const cuuint32_t*,
                             const cuuint32_t*, CUtensorMapInterleave, CUtensorMapSwizzle,
                             CUtensorMapL2promotion, CUtensorMapFloatOOBfill);
using Im2colFn = CUresult (*)(CUtensorMap*, CUtensorMapDataType, cuuint32_t, void*,
                              const cuuint64_t*, const cuuint64_t*, const int*, const int*,
                              cuuint32_t, cuuint32_t, const cuuint32_t*, CUtensorMapInterleave,
                              CUtensorMapSwizzle, CUtensorMapL2promotion, CUtensorMapFloatOOBfill);
using Im2colWideFn = CUresult (*)(CUtensorMap*, CUtensorMapDataType, cuuint32_t, void*,
                                  const cuuint64_t*, const cuuint64_t*, int, int, cuuint32_t,
                                  cuuint32_t, const cuuint32_t*, CUtensorMapInterleave,
                                  CUtensorMapIm2ColWideMode, CUtensorMapSwizzle,
                                  CUtensorMapL2promotion, CUtensorMapFloatOOBfill);
using ReplaceFn = CUresult (*)(CUtensorMap*, void*);
using BlockSizeFn = CUresult (*)(int*, int*, CUfunction, CUoccupancyB2DSize, size_t, int, unsigned);
using Wait32Fn = CUresult (*)(CUstream, CUdeviceptr, cuuint32_t, unsigned);
using Wait64Fn = CUresult (*)(CUstream, CUdeviceptr, cuuint64_t, unsigned);
using BatchFn = CUresult (*)(CUstream, unsigned, CUstreamBatchMemOpParams*, unsigned);
using LinkCreateFn = CUresult (*)(unsigned, CUjit_option*, void**, CUlinkState*);
using LinkAddFn = CUresult (*)(CUlinkState, CUjitInputType, void*, size_t, const char*, unsigned,
                               CUjit_option*, void**);
using LinkCompleteFn = CUresult (*)(CUlinkState, void**, size_t*);
using LinkDestroyFn = CUresult (*)(CUlinkState);

// Arrays the driver reads: null where the program gave none (empty), as it would.
template <class T>
const T* data_or_null(const std::vector<T>& v) {
  return v.empty() ? nullptr : v.data();
}

}  // namespace

Status cuda_tensor_map_encode(const CudaDriver& drv, const Executor::TensorMapArgs& a,
                              uint8_t (&map)[128]) {
  CUtensorMap m{};
  const auto type = static_cast<CUtensorMapDataType>(a.data_type);
  void* address = reinterpret_cast<void*>(static_cast<uintptr_t>(a.address));
  const auto* dims = reinterpret_cast<const cuuint64_t*>(data_or_null(a.dims));
  // A rank-1 map has no global strides, and whether the driver takes a null array there is not
  // documented: it gets an (unread) array, as from programs that pass one.
  static const cuuint64_t kNoStrides[1] = {0};
  const auto* strides = a.strides.empty() && a.rank == 1
                            ? kNoStrides
                            : reinterpret_cast<const cuuint64_t*>(data_or_null(a.strides));
  const auto* elem = reinterpret_cast<const cuuint32_t*>(data_or_null(a.elem_strides));
  const auto il = static_cast<CUtensorMapInterleave>(a.interleave);
  const auto sw = static_cast<CUtensorMapSwizzle>(a.swizzle);
  const auto l2 = static_cast<CUtensorMapL2promotion>(a.l2_promotion);
  const auto oob = static_cast<CUtensorMapFloatOOBfill>(a.oob_fill);
  CUresult r;
  const char* name;
  if (a.kind == 0) {
    name = "cuTensorMapEncodeTiled";
    auto fn = driver_fn<TiledFn>(drv, name);
    if (!fn) return missing(name);
    r = fn(&m, type, a.rank, address, dims, strides,
           reinterpret_cast<const cuuint32_t*>(data_or_null(a.box)), elem, il, sw, l2, oob);
  } else if (a.kind == 1) {
    name = "cuTensorMapEncodeIm2col";
    auto fn = driver_fn<Im2colFn>(drv, name);
    if (!fn) return missing(name);
    r = fn(&m, type, a.rank, address, dims, strides, data_or_null(a.lower), data_or_null(a.upper),
           a.channels, a.pixels, elem, il, sw, l2, oob);
  } else if (a.kind == 2) {
    name = "cuTensorMapEncodeIm2colWide";
    auto fn = driver_fn<Im2colWideFn>(drv, name);
    if (!fn) return missing(name);
    if (a.lower.size() != 1 || a.upper.size() != 1)
      return Status::fail(err::InvalidValue, "im2col wide: one lower and one upper corner width");
    r = fn(&m, type, a.rank, address, dims, strides, a.lower[0], a.upper[0], a.channels, a.pixels,
           elem, il, static_cast<CUtensorMapIm2ColWideMode>(a.mode), sw, l2, oob);
  } else {
    return Status::fail(err::InvalidValue, "unknown tensor map kind " + std::to_string(a.kind));
  }
  if (Status s = result(drv, r, name); !s.ok()) return s;
  static_assert(sizeof m == 128, "CUtensorMap is 128 bytes");
  std::memcpy(map, &m, sizeof m);
  return Status::success();
}

Status cuda_tensor_map_replace_address(const CudaDriver& drv, uint8_t (&map)[128],
                                       uint64_t address) {
  const char* name = "cuTensorMapReplaceAddress";
  auto fn = driver_fn<ReplaceFn>(drv, name);
  if (!fn) return missing(name);
  CUtensorMap m;
  std::memcpy(&m, map, sizeof m);
  if (Status s =
          result(drv, fn(&m, reinterpret_cast<void*>(static_cast<uintptr_t>(address))), name);
      !s.ok())
    return s;
  std::memcpy(map, &m, sizeof m);
  return Status::success();
}

Status cuda_occupancy_block_size(const CudaDriver& drv, CUfunction f, uint64_t dynamic_smem,
                                 int32_t limit, uint32_t flags, int32_t& min_grid,
                                 int32_t& block_size) {
  const char* name = "cuOccupancyMaxPotentialBlockSizeWithFlags";
  auto fn = driver_fn<BlockSizeFn>(drv, name);
  if (!fn) return missing(name);
  int grid = 0, block = 0;
  if (Status s = result(drv, fn(&grid, &block, f, nullptr, dynamic_smem, limit, flags), name);
      !s.ok())
    return s;
  min_grid = grid;
  block_size = block;
  return Status::success();
}

Status cuda_stream_mem_ops(const CudaDriver& drv, CUstream stream,
                           const std::vector<Executor::MemOp>& ops) {
  if (ops.size() == 1 && ops[0].op != CU_STREAM_MEM_OP_BARRIER &&
      ops[0].op != CU_STREAM_MEM_OP_FLUSH_REMOTE_WRITES) {
    // One operation: its own entry point, which drivers support more widely than batches.
    const Executor::MemOp& o = ops[0];
    const char* name = o.op == CU_STREAM_MEM_OP_WAIT_VALUE_32    ? "cuStreamWaitValue32_v2"
                       : o.op == CU_STREAM_MEM_OP_WRITE_VALUE_32 ? "cuStreamWriteValue32_v2"
                       : o.op == CU_STREAM_MEM_OP_WAIT_VALUE_64  ? "cuStreamWaitValue64_v2"
                                                                 : "cuStreamWriteValue64_v2";
    const bool wide =
        o.op == CU_STREAM_MEM_OP_WAIT_VALUE_64 || o.op == CU_STREAM_MEM_OP_WRITE_VALUE_64;
    if (wide) {
      auto fn = driver_fn<Wait64Fn>(drv, name);
      if (!fn) return missing(name);
      return result(drv, fn(stream, o.address, o.value, o.flags), name);
    }
    auto fn = driver_fn<Wait32Fn>(drv, name);
    if (!fn) return missing(name);
    return result(drv, fn(stream, o.address, static_cast<cuuint32_t>(o.value), o.flags), name);
  }
  const char* name = "cuStreamBatchMemOp_v2";
  auto fn = driver_fn<BatchFn>(drv, name);
  if (!fn) return missing(name);
  std::vector<CUstreamBatchMemOpParams> p(ops.size());
  for (size_t i = 0; i < ops.size(); ++i) {
    std::memset(&p[i], 0, sizeof p[i]);
    const Executor::MemOp& o = ops[i];
    const auto type = static_cast<CUstreamBatchMemOpType>(o.op);
    switch (type) {
      case CU_STREAM_MEM_OP_WAIT_VALUE_32:
      case CU_STREAM_MEM_OP_WAIT_VALUE_64:
        p[i].waitValue.operation = type;
        p[i].waitValue.address = o.address;
        if (type == CU_STREAM_MEM_OP_WAIT_VALUE_64)
          p[i].waitValue.value64 = o.value;
        else
          p[i].waitValue.value = static_cast<cuuint32_t>(o.value);
        p[i].waitValue.flags = o.flags;
        break;
      case CU_STREAM_MEM_OP_WRITE_VALUE_32:
      case CU_STREAM_MEM_OP_WRITE_VALUE_64:
        p[i].writeValue.operation = type;
        p[i].writeValue.address = o.address;
        if (type == CU_STREAM_MEM_OP_WRITE_VALUE_64)
          p[i].writeValue.value64 = o.value;
        else
          p[i].writeValue.value = static_cast<cuuint32_t>(o.value);
        p[i].writeValue.flags = o.flags;
        break;
      case CU_STREAM_MEM_OP_FLUSH_REMOTE_WRITES:
        p[i].flushRemoteWrites.operation = type;
        p[i].flushRemoteWrites.flags = o.flags;
        break;
      case CU_STREAM_MEM_OP_BARRIER:
        p[i].memoryBarrier.operation = type;
        p[i].memoryBarrier.flags = o.flags;
        break;
      default:
        return Status::fail(err::InvalidValue,
                            "unknown stream memory operation " + std::to_string(o.op));
    }
  }
  return result(drv, fn(stream, static_cast<unsigned>(p.size()), p.data(), 0), name);
}

Status cuda_link_create(const CudaDriver& drv, uint64_t& link) {
  const char* name = "cuLinkCreate_v2";
  auto fn = driver_fn<LinkCreateFn>(drv, name);
  if (!fn) return missing(name);
  CUlinkState st = nullptr;
  if (Status s = result(drv, fn(0, nullptr, nullptr, &st), name); !s.ok()) return s;
  link = reinterpret_cast<uint64_t>(st);
  return Status::success();
}

Status cuda_link_add(const CudaDriver& drv, uint64_t link, uint32_t type, const std::string& name,
                     const uint8_t* data, size_t size) {
  const char* fname = "cuLinkAddData_v2";
  auto fn = driver_fn<LinkAddFn>(drv, fname);
  if (!fn) return missing(fname);
  return result(drv,
                fn(reinterpret_cast<CUlinkState>(link), static_cast<CUjitInputType>(type),
                   const_cast<uint8_t*>(data), size, name.c_str(), 0, nullptr, nullptr),
                fname);
}

Status cuda_link_complete(const CudaDriver& drv, uint64_t link, std::vector<uint8_t>& image) {
  const char* name = "cuLinkComplete";
  auto fn = driver_fn<LinkCompleteFn>(drv, name);
  if (!fn) return missing(name);
  void* out = nullptr;
  size_t size = 0;
  if (Status s = result(drv, fn(reinterpret_cast<CUlinkState>(link), &out, &size), name); !s.ok())
    return s;
  // The image belongs to the link state (valid until cuLinkDestroy): copied out.
  const auto* p = static_cast<const uint8_t*>(out);
  image.assign(p, p + size);
  return Status::success();
}

Status cuda_link_destroy(const CudaDriver& drv, uint64_t link) {
  const char* name = "cuLinkDestroy";
  auto fn = driver_fn<LinkDestroyFn>(drv, name);
  if (!fn) return missing(name);
  return result(drv, fn(reinterpret_cast<CUlinkState>(link)), name);
}

}  // namespace rgpu::backend
