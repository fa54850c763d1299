// Pitched and 3-D memory (issue 11 item 7): cudaMallocPitch, cudaMalloc3D, cudaMemcpy3D (and
// peer, asynchronous and batch forms), cudaMemset2D/3D.  A 3-D copy with a cudaArray operand goes
// to arrays_copy.cc; the batch form still refuses array operands.
#include <functional>
#include <mutex>

#include "common/log.h"
#include "frontend/cudart/api.h"
#include "frontend/cudart/arrays.h"

using namespace rgpu;
using rgpu::cudart::core;
using rgpu::cudart::ret;

#define RGPU_EXPORT extern "C" __attribute__((visibility("default")))

namespace {

CudaError refuse_array(const char* call) {
  static std::once_flag once;
  std::call_once(once, [&] {
    LOG_ERROR(
        "%s: cudaArray operands are not supported yet (linear memory only); "
        "returning cudaErrorNotSupported",
        call);
  });
  return err::NotSupported;
}

char* at(void* base, size_t pitch, size_t rows, const cudaPos& pos) {
  return static_cast<char*>(base) + pos.z * pitch * rows + pos.y * pitch + pos.x;
}

CudaError copy_of(const cudaMemcpy3DParms* p, const char* call, client::Client::Copy3D* c) {
  if (!p) return err::InvalidValue;
  if (p->srcArray || p->dstArray) return refuse_array(call);
  if (!p->srcPtr.ptr || !p->dstPtr.ptr) return err::InvalidValue;
  c->src = at(p->srcPtr.ptr, p->srcPtr.pitch, p->srcPtr.ysize, p->srcPos);
  c->spitch = p->srcPtr.pitch;
  c->sslice_rows = p->srcPtr.ysize;
  c->dst = at(p->dstPtr.ptr, p->dstPtr.pitch, p->dstPtr.ysize, p->dstPos);
  c->dpitch = p->dstPtr.pitch;
  c->dslice_rows = p->dstPtr.ysize;
  c->width = p->extent.width;
  c->height = p->extent.height;
  c->depth = p->extent.depth;
  c->kind = static_cast<client::CopyKind>(p->kind);
  if (p->kind < cudaMemcpyHostToHost || p->kind > cudaMemcpyDefault)
    return err::InvalidMemcpyDirection;
  return err::Success;
}

CudaError peer_copy_of(const cudaMemcpy3DPeerParms* p, client::Client::Copy3D* c) {
  if (!p) return err::InvalidValue;
  cudaMemcpy3DParms q{};
  q.srcArray = p->srcArray, q.srcPos = p->srcPos, q.srcPtr = p->srcPtr;
  q.dstArray = p->dstArray, q.dstPos = p->dstPos, q.dstPtr = p->dstPtr;
  q.extent = p->extent, q.kind = cudaMemcpyDeviceToDevice;
  return copy_of(&q, "cudaMemcpy3DPeer", c);
}

// Resolves the stream (`per_thread`: the _ptsz/_ptds meaning of 0), runs `op` on it, and for a
// synchronous per-thread entry point waits for it.
cudaError_t on_stream(cudaStream_t stream, bool per_thread, bool wait,
                      const std::function<CudaError(const client::Stream&)>& op) {
  client::Stream s;
  if (CudaError e = rgpu::cudart::stream_arg(stream, per_thread, &s); e != err::Success)
    return ret(e);
  CudaError e = op(s);
  if (e == err::Success && wait) e = core().stream_synchronize(s);
  return ret(e);
}

cudaError_t memcpy3d(const cudaMemcpy3DParms* p, cudaStream_t stream, bool async, bool per_thread) {
  if (p && (p->srcArray || p->dstArray))
    return rgpu::cudart::memcpy3d_array(p, stream, async, per_thread);
  client::Client::Copy3D c;
  if (CudaError e = copy_of(p, "cudaMemcpy3D", &c); e != err::Success) return ret(e);
  if (!async && !per_thread) return ret(core().memcpy3d(c, nullptr));
  return on_stream(stream, per_thread, !async,
                   [&](const client::Stream& s) { return core().memcpy3d(c, &s); });
}

cudaError_t memcpy3d_peer(const cudaMemcpy3DPeerParms* p, cudaStream_t stream, bool async,
                          bool per_thread) {
  if (p && (p->srcArray || p->dstArray)) {
    // Arrays are used on their own device: a peer copy with one is an ordinary 3-D copy there.
    if (p->srcDevice != p->dstDevice) return ret(err::InvalidValue);
    cudaMemcpy3DParms q{};
    q.srcArray = p->srcArray, q.srcPos = p->srcPos, q.srcPtr = p->srcPtr;
    q.dstArray = p->dstArray, q.dstPos = p->dstPos, q.dstPtr = p->dstPtr;
    q.extent = p->extent, q.kind = cudaMemcpyDeviceToDevice;
    return rgpu::cudart::memcpy3d_array(&q, stream, async, per_thread);
  }
  client::Client::Copy3D c;
  if (CudaError e = peer_copy_of(p, &c); e != err::Success) return ret(e);
  if (!async && !per_thread)
    return ret(core().memcpy3d_peer(c, p->dstDevice, p->srcDevice, nullptr));
  return on_stream(stream, per_thread, !async, [&](const client::Stream& s) {
    return core().memcpy3d_peer(c, p->dstDevice, p->srcDevice, &s);
  });
}

cudaError_t memset3d(cudaPitchedPtr p, int value, cudaExtent e, cudaStream_t stream, bool async,
                     bool per_thread) {
  auto op = [&](const client::Stream* s) {
    return core().memset3d(p.ptr, p.pitch, p.ysize, value, e.width, e.height, e.depth, s);
  };
  if (!async && !per_thread) return ret(op(nullptr));
  return on_stream(stream, per_thread, false, [&](const client::Stream& s) { return op(&s); });
}

cudaError_t memset2d(void* ptr, size_t pitch, int value, size_t width, size_t height,
                     cudaStream_t stream, bool async, bool per_thread) {
  return memset3d(cudaPitchedPtr{ptr, pitch, width, height}, value, cudaExtent{width, height, 1},
                  stream, async, per_thread);
}

bool legacy(cudaStream_t s, bool per_thread) {
  return s == cudaStreamLegacy || (s == nullptr && !per_thread);
}

cudaError_t batch(void* const* dsts, const void* const* srcs, const size_t* sizes, size_t count,
                  cudaMemcpyAttributes* attrs, size_t* idxs, size_t num_attrs, cudaStream_t stream,
                  bool per_thread) {
  if (count == 0 || !dsts || !srcs || !sizes || !attrs || !idxs || num_attrs == 0 ||
      num_attrs > count || idxs[0] != 0 || legacy(stream, per_thread))
    return ret(err::InvalidValue);
  for (size_t k = 0; k < num_attrs; ++k) {
    if (k > 0 && idxs[k] <= idxs[k - 1]) return ret(err::InvalidValue);
    if (idxs[k] >= count) return ret(err::InvalidValue);
    if (attrs[k].srcAccessOrder == cudaMemcpySrcAccessOrderInvalid ||
        attrs[k].srcAccessOrder > cudaMemcpySrcAccessOrderAny)
      return ret(err::InvalidValue);
  }
  // Every access order is met: host bytes are taken at the call, in stream order on the server.
  return on_stream(stream, per_thread, false, [&](const client::Stream& s) {
    for (size_t i = 0; i < count; ++i) {
      CudaError e = core().memcpy2d_async(dsts[i], sizes[i], srcs[i], sizes[i], sizes[i], 1,
                                          client::CopyKind::Default, s);
      if (e != err::Success) return e;
    }
    return err::Success;
  });
}

cudaError_t batch3d(size_t n, cudaMemcpy3DBatchOp* ops, unsigned long long flags,
                    cudaStream_t stream, bool per_thread) {
  if (n == 0 || !ops || flags != 0 || legacy(stream, per_thread)) return ret(err::InvalidValue);
  std::vector<client::Client::Copy3D> copies(n);
  for (size_t i = 0; i < n; ++i) {
    const cudaMemcpy3DBatchOp& op = ops[i];
    if (op.src.type == cudaMemcpyOperandTypeArray || op.dst.type == cudaMemcpyOperandTypeArray)
      return ret(refuse_array("cudaMemcpy3DBatchAsync"));
    if (op.src.type != cudaMemcpyOperandTypePointer ||
        op.dst.type != cudaMemcpyOperandTypePointer || op.extent.width == 0 ||
        op.extent.height == 0 || op.extent.depth == 0 ||
        op.srcAccessOrder == cudaMemcpySrcAccessOrderInvalid ||
        op.srcAccessOrder > cudaMemcpySrcAccessOrderAny)
      return ret(err::InvalidValue);
    auto& sp = op.src.op.ptr;
    auto& dp = op.dst.op.ptr;
    // Elements are bytes between pointers; 0 means tightly packed.
    if ((sp.rowLength && sp.rowLength < op.extent.width) ||
        (dp.rowLength && dp.rowLength < op.extent.width) ||
        (sp.layerHeight && sp.layerHeight < op.extent.height) ||
        (dp.layerHeight && dp.layerHeight < op.extent.height))
      return ret(err::InvalidValue);
    client::Client::Copy3D& c = copies[i];
    c.src = sp.ptr, c.spitch = sp.rowLength ? sp.rowLength : op.extent.width;
    c.sslice_rows = sp.layerHeight ? sp.layerHeight : op.extent.height;
    c.dst = dp.ptr, c.dpitch = dp.rowLength ? dp.rowLength : op.extent.width;
    c.dslice_rows = dp.layerHeight ? dp.layerHeight : op.extent.height;
    c.width = op.extent.width, c.height = op.extent.height, c.depth = op.extent.depth;
    c.kind = client::CopyKind::Default;
  }
  return on_stream(stream, per_thread, false, [&](const client::Stream& s) {
    for (const auto& c : copies)
      if (CudaError e = core().memcpy3d(c, &s); e != err::Success) return e;
    return err::Success;
  });
}

}  // namespace

extern "C" {

cudaError_t cudaMallocPitch(void** devPtr, size_t* pitch, size_t width, size_t height) {
  return ret(core().malloc_pitch(core().current_device(), width, height, devPtr, pitch));
}

cudaError_t cudaMalloc3D(struct cudaPitchedPtr* pitchedDevPtr, struct cudaExtent extent) {
  if (!pitchedDevPtr) return ret(err::InvalidValue);
  size_t rows = 0;
  if (__builtin_mul_overflow(extent.height, extent.depth, &rows)) return ret(err::MemoryAllocation);
  void* p = nullptr;
  size_t pitch = 0;
  if (CudaError e = core().malloc_pitch(core().current_device(), extent.width, rows, &p, &pitch);
      e != err::Success)
    return ret(e);
  *pitchedDevPtr = cudaPitchedPtr{p, pitch, extent.width, extent.height};
  return cudaSuccess;
}

cudaError_t cudaMemcpy3D(const struct cudaMemcpy3DParms* p) {
  return memcpy3d(p, nullptr, false, false);
}
cudaError_t cudaMemcpy3DAsync(const struct cudaMemcpy3DParms* p, cudaStream_t stream) {
  return memcpy3d(p, stream, true, false);
}
cudaError_t cudaMemcpy3DPeer(const struct cudaMemcpy3DPeerParms* p) {
  return memcpy3d_peer(p, nullptr, false, false);
}
cudaError_t cudaMemcpy3DPeerAsync(const struct cudaMemcpy3DPeerParms* p, cudaStream_t stream) {
  return memcpy3d_peer(p, stream, true, false);
}
cudaError_t cudaMemset2D(void* devPtr, size_t pitch, int value, size_t width, size_t height) {
  return memset2d(devPtr, pitch, value, width, height, nullptr, false, false);
}
cudaError_t cudaMemset2DAsync(void* devPtr, size_t pitch, int value, size_t width, size_t height,
                              cudaStream_t stream) {
  return memset2d(devPtr, pitch, value, width, height, stream, true, false);
}
cudaError_t cudaMemset3D(struct cudaPitchedPtr pitchedDevPtr, int value, struct cudaExtent extent) {
  return memset3d(pitchedDevPtr, value, extent, nullptr, false, false);
}
cudaError_t cudaMemset3DAsync(struct cudaPitchedPtr pitchedDevPtr, int value,
                              struct cudaExtent extent, cudaStream_t stream) {
  return memset3d(pitchedDevPtr, value, extent, stream, true, false);
}
cudaError_t cudaMemcpyBatchAsync(void* const* dsts, const void* const* srcs, const size_t* sizes,
                                 size_t count, struct cudaMemcpyAttributes* attrs,
                                 size_t* attrsIdxs, size_t numAttrs, cudaStream_t stream) {
  return batch(dsts, srcs, sizes, count, attrs, attrsIdxs, numAttrs, stream, false);
}
cudaError_t cudaMemcpy3DBatchAsync(size_t numOps, struct cudaMemcpy3DBatchOp* opList,
                                   unsigned long long flags, cudaStream_t stream) {
  return batch3d(numOps, opList, flags, stream, false);
}

}  // extern "C"

// Per-thread default stream entry points (--default-stream per-thread).
RGPU_EXPORT cudaError_t cudaMemcpy3D_ptds(const cudaMemcpy3DParms* p) {
  return memcpy3d(p, nullptr, false, true);
}
RGPU_EXPORT cudaError_t cudaMemcpy3DAsync_ptsz(const cudaMemcpy3DParms* p, cudaStream_t s) {
  return memcpy3d(p, s, true, true);
}
RGPU_EXPORT cudaError_t cudaMemcpy3DPeer_ptds(const cudaMemcpy3DPeerParms* p) {
  return memcpy3d_peer(p, nullptr, false, true);
}
RGPU_EXPORT cudaError_t cudaMemcpy3DPeerAsync_ptsz(const cudaMemcpy3DPeerParms* p, cudaStream_t s) {
  return memcpy3d_peer(p, s, true, true);
}
RGPU_EXPORT cudaError_t cudaMemset2D_ptds(void* p, size_t pitch, int v, size_t w, size_t h) {
  return memset2d(p, pitch, v, w, h, nullptr, false, true);
}
RGPU_EXPORT cudaError_t cudaMemset2DAsync_ptsz(void* p, size_t pitch, int v, size_t w, size_t h,
                                               cudaStream_t s) {
  return memset2d(p, pitch, v, w, h, s, true, true);
}
RGPU_EXPORT cudaError_t cudaMemset3D_ptds(cudaPitchedPtr p, int v, cudaExtent e) {
  return memset3d(p, v, e, nullptr, false, true);
}
RGPU_EXPORT cudaError_t cudaMemset3DAsync_ptsz(cudaPitchedPtr p, int v, cudaExtent e,
                                               cudaStream_t s) {
  return memset3d(p, v, e, s, true, true);
}
RGPU_EXPORT cudaError_t cudaMemcpyBatchAsync_ptsz(void* const* dsts, const void* const* srcs,
                                                  const size_t* sizes, size_t count,
                                                  cudaMemcpyAttributes* attrs, size_t* idxs,
                                                  size_t num_attrs, cudaStream_t s) {
  return batch(dsts, srcs, sizes, count, attrs, idxs, num_attrs, s, true);
}
RGPU_EXPORT cudaError_t cudaMemcpy3DBatchAsync_ptsz(size_t n, cudaMemcpy3DBatchOp* ops,
                                                    unsigned long long flags, cudaStream_t s) {
  return batch3d(n, ops, flags, s, true);
}
