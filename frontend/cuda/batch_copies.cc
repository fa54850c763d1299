// Batched copies (cuMemcpyBatchAsync, cuMemcpy3DBatchAsync): each operation is an ordinary
// asynchronous copy on the stream, in order.  Every source access order is met: host bytes are
// taken at the call, device bytes in stream order on the server.  Array operands in the 3-D form
// are refused (as the runtime's batch form does).
#include <cstdint>
#include <vector>

#include "frontend/cuda/api.h"

using namespace rgpu;
using rgpu::cuda_fe::core;
using rgpu::cuda_fe::ptr;
using rgpu::cuda_fe::to_driver;

namespace {

bool legacy(CUstream s, bool pt) {
  const auto h = reinterpret_cast<uintptr_t>(s);
  return h == cuda_fe::kStreamLegacy || (h == 0 && !pt);
}

bool bad_order(CUmemcpySrcAccessOrder o) {
  return o == CU_MEMCPY_SRC_ACCESS_ORDER_INVALID || o > CU_MEMCPY_SRC_ACCESS_ORDER_ANY;
}

CUresult batch(CUdeviceptr* dsts, CUdeviceptr* srcs, size_t* sizes, size_t count,
               CUmemcpyAttributes* attrs, size_t* idxs, size_t num_attrs, CUstream st, bool pt,
               size_t* fail = nullptr) {
  RGPU_INIT();
  if (count == 0 || !dsts || !srcs || !sizes || !attrs || !idxs || num_attrs == 0 ||
      num_attrs > count || idxs[0] != 0 || legacy(st, pt))
    return CUDA_ERROR_INVALID_VALUE;
  for (size_t k = 0; k < num_attrs; ++k) {
    if ((k > 0 && idxs[k] <= idxs[k - 1]) || idxs[k] >= count) return CUDA_ERROR_INVALID_VALUE;
    if (bad_order(attrs[k].srcAccessOrder)) return CUDA_ERROR_INVALID_VALUE;
  }
  client::Stream s;
  if (client::Error e = cuda_fe::stream_of(st, pt, &s); e != err::Success) return to_driver(e);
  for (size_t i = 0; i < count; ++i)
    if (client::Error e = core().memcpy2d_async(ptr(dsts[i]), sizes[i], ptr(srcs[i]), sizes[i],
                                                sizes[i], 1, client::CopyKind::Default, s);
        e != err::Success) {
      if (fail) *fail = i;
      return to_driver(e);
    }
  return CUDA_SUCCESS;
}

CUresult batch3d(size_t n, CUDA_MEMCPY3D_BATCH_OP* ops, unsigned long long flags, CUstream st,
                 bool pt, size_t* fail = nullptr) {
  RGPU_INIT();
  if (n == 0 || !ops || flags != 0 || legacy(st, pt)) return CUDA_ERROR_INVALID_VALUE;
  std::vector<client::Client::Copy3D> copies(n);
  for (size_t i = 0; i < n; ++i) {
    const CUDA_MEMCPY3D_BATCH_OP& op = ops[i];
    if (op.src.type == CU_MEMCPY_OPERAND_TYPE_ARRAY || op.dst.type == CU_MEMCPY_OPERAND_TYPE_ARRAY)
      return static_cast<CUresult>(
          cuda_fe::unsupported("cuMemcpy3DBatchAsync with a CUDA array operand"));
    if (op.src.type != CU_MEMCPY_OPERAND_TYPE_POINTER ||
        op.dst.type != CU_MEMCPY_OPERAND_TYPE_POINTER || op.extent.width == 0 ||
        op.extent.height == 0 || op.extent.depth == 0 || bad_order(op.srcAccessOrder))
      return CUDA_ERROR_INVALID_VALUE;
    auto& sp = op.src.op.ptr;
    auto& dp = op.dst.op.ptr;
    // Elements are bytes between pointers; 0 means tightly packed.
    if ((sp.rowLength && sp.rowLength < op.extent.width) ||
        (dp.rowLength && dp.rowLength < op.extent.width) ||
        (sp.layerHeight && sp.layerHeight < op.extent.height) ||
        (dp.layerHeight && dp.layerHeight < op.extent.height))
      return CUDA_ERROR_INVALID_VALUE;
    client::Client::Copy3D& c = copies[i];
    c.src = ptr(sp.ptr), c.spitch = sp.rowLength ? sp.rowLength : op.extent.width;
    c.sslice_rows = sp.layerHeight ? sp.layerHeight : op.extent.height;
    c.dst = ptr(dp.ptr), c.dpitch = dp.rowLength ? dp.rowLength : op.extent.width;
    c.dslice_rows = dp.layerHeight ? dp.layerHeight : op.extent.height;
    c.width = op.extent.width, c.height = op.extent.height, c.depth = op.extent.depth;
    c.kind = client::CopyKind::Default;
  }
  client::Stream s;
  if (client::Error e = cuda_fe::stream_of(st, pt, &s); e != err::Success) return to_driver(e);
  for (size_t i = 0; i < copies.size(); ++i)
    if (client::Error e = core().memcpy3d(copies[i], &s); e != err::Success) {
      if (fail) *fail = i;
      return to_driver(e);
    }
  return CUDA_SUCCESS;
}

}  // namespace

RGPU_CU CUresult cuMemcpyBatchAsync_v2(CUdeviceptr* dsts, CUdeviceptr* srcs, size_t* sizes,
                                       size_t count, CUmemcpyAttributes* attrs, size_t* attrsIdxs,
                                       size_t numAttrs, CUstream hStream) {
  return batch(dsts, srcs, sizes, count, attrs, attrsIdxs, numAttrs, hStream, false);
}
RGPU_CU CUresult cuMemcpyBatchAsync_v2_ptsz(CUdeviceptr* dsts, CUdeviceptr* srcs, size_t* sizes,
                                            size_t count, CUmemcpyAttributes* attrs,
                                            size_t* attrsIdxs, size_t numAttrs, CUstream hStream) {
  return batch(dsts, srcs, sizes, count, attrs, attrsIdxs, numAttrs, hStream, true);
}
RGPU_CU CUresult cuMemcpy3DBatchAsync_v2(size_t numOps, CUDA_MEMCPY3D_BATCH_OP* opList,
                                         unsigned long long flags, CUstream hStream) {
  return batch3d(numOps, opList, flags, hStream, false);
}
RGPU_CU CUresult cuMemcpy3DBatchAsync_v2_ptsz(size_t numOps, CUDA_MEMCPY3D_BATCH_OP* opList,
                                              unsigned long long flags, CUstream hStream) {
  return batch3d(numOps, opList, flags, hStream, true);
}

// The first versions also report the index of the operation that failed (SIZE_MAX when the
// failure concerns no one operation).
#undef cuMemcpyBatchAsync
#undef cuMemcpy3DBatchAsync
RGPU_CU CUresult cuMemcpyBatchAsync(CUdeviceptr* dsts, CUdeviceptr* srcs, size_t* sizes,
                                    size_t count, CUmemcpyAttributes* attrs, size_t* attrsIdxs,
                                    size_t numAttrs, size_t* failIdx, CUstream hStream) {
  if (failIdx) *failIdx = SIZE_MAX;
  return batch(dsts, srcs, sizes, count, attrs, attrsIdxs, numAttrs, hStream, false, failIdx);
}
RGPU_CU CUresult cuMemcpy3DBatchAsync(size_t numOps, CUDA_MEMCPY3D_BATCH_OP* opList,
                                      size_t* failIdx, unsigned long long flags, CUstream hStream) {
  if (failIdx) *failIdx = SIZE_MAX;
  return batch3d(numOps, opList, flags, hStream, false, failIdx);
}
#undef cuMemcpyBatchAsync_ptsz
#undef cuMemcpy3DBatchAsync_ptsz
RGPU_CU CUresult cuMemcpyBatchAsync_ptsz(CUdeviceptr* dsts, CUdeviceptr* srcs, size_t* sizes,
                                         size_t count, CUmemcpyAttributes* attrs, size_t* attrsIdxs,
                                         size_t numAttrs, size_t* failIdx, CUstream hStream) {
  if (failIdx) *failIdx = SIZE_MAX;
  return batch(dsts, srcs, sizes, count, attrs, attrsIdxs, numAttrs, hStream, true, failIdx);
}
RGPU_CU CUresult cuMemcpy3DBatchAsync_ptsz(size_t numOps, CUDA_MEMCPY3D_BATCH_OP* opList,
                                           size_t* failIdx, unsigned long long flags,
                                           CUstream hStream) {
  if (failIdx) *failIdx = SIZE_MAX;
  return batch3d(numOps, opList, flags, hStream, true, failIdx);
}
