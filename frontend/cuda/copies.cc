// Every linear-memory cuMemcpy* form (host/device/UVA/peer, 2-D, 3-D; synchronous, per-thread
// default stream, asynchronous) and every cuMemsetD* form.
//
// Synchronous copies take the core's synchronous path (legacy-stream ordering); the _ptds
// variants copy on the calling thread's default stream and wait for it, as the runtime
// front-end's do.  cuMemsetD16/D32 whose pattern is one repeated byte are byte memsets; any other
// pattern is a host-to-device copy of the pattern (the wire's memset carries one byte), or, in
// page-locked host memory, filled here (Client::fill_host).
#include <cstdint>
#include <cstring>
#include <vector>

#include "common/cuda_errors.h"
#include "common/log.h"
#include "frontend/cuda/arrays.h"

using namespace rgpu;
using client::CopyKind;
using rgpu::cuda_fe::core;
using rgpu::cuda_fe::ptr;
using rgpu::cuda_fe::to_driver;

namespace {

using Mode = cuda_fe::CopyMode;

// One 2-D copy (a 1-D copy is one row) in `mode`; `pt`: stream 0 is the thread's stream.
CUresult copy2d(void* dst, size_t dpitch, const void* src, size_t spitch, size_t width,
                size_t height, CopyKind kind, Mode mode, CUstream st = nullptr, bool pt = false) {
  RGPU_INIT();
  if (!width || !height) return CUDA_SUCCESS;
  if (mode == Mode::Sync)
    return to_driver(height == 1 ? core().memcpy(dst, src, width, kind)
                                 : core().memcpy2d(dst, dpitch, src, spitch, width, height, kind));
  client::Stream s;
  if (client::Error e = cuda_fe::stream_of(st, mode == Mode::SyncThread || pt, &s);
      e != err::Success)
    return to_driver(e);
  client::Error e = core().memcpy2d_async(dst, dpitch, src, spitch, width, height, kind, s);
  if (e == err::Success && mode == Mode::SyncThread) e = core().stream_synchronize(s);
  return to_driver(e);
}

CUresult copy(void* dst, const void* src, size_t n, CopyKind kind, Mode mode, CUstream st = nullptr,
              bool pt = false) {
  return copy2d(dst, n, src, n, n, 1, kind, mode, st, pt);
}

// An operand of a CUDA_MEMCPY2D/3D: its address at (x, y, z) and its kind.
struct Operand {
  void* p = nullptr;
  bool device = false;
  bool unified = false;
};
CUresult operand(CUmemorytype type, const void* host, CUdeviceptr dev, CUarray array, size_t x,
                 size_t y, size_t z, size_t pitch, size_t rows, Operand* out) {
  const size_t off = (z * rows + y) * pitch + x;
  switch (type) {
    case CU_MEMORYTYPE_HOST:
      out->p = static_cast<char*>(const_cast<void*>(host)) + off;
      return CUDA_SUCCESS;
    case CU_MEMORYTYPE_DEVICE:
      out->p = static_cast<char*>(ptr(dev)) + off, out->device = true;
      return CUDA_SUCCESS;
    case CU_MEMORYTYPE_UNIFIED:
      out->p = static_cast<char*>(ptr(dev)) + off, out->unified = true;
      return CUDA_SUCCESS;
    case CU_MEMORYTYPE_ARRAY:  // array_copies.cc
      (void)array;
      return CUDA_ERROR_INVALID_VALUE;
  }
  return CUDA_ERROR_INVALID_VALUE;
}
CopyKind kind_of(const Operand& d, const Operand& s) {
  if (d.unified || s.unified) return CopyKind::Default;
  if (d.device) return s.device ? CopyKind::DeviceToDevice : CopyKind::HostToDevice;
  return s.device ? CopyKind::DeviceToHost : CopyKind::HostToHost;
}

CUresult copy_2d(const CUDA_MEMCPY2D* c, Mode mode, CUstream st = nullptr, bool pt = false) {
  if (!c) return CUDA_ERROR_INVALID_VALUE;
  if (c->dstMemoryType == CU_MEMORYTYPE_ARRAY || c->srcMemoryType == CU_MEMORYTYPE_ARRAY) {
    RGPU_INIT();
    CUDA_MEMCPY3D q{};
    q.srcXInBytes = c->srcXInBytes, q.srcY = c->srcY, q.srcMemoryType = c->srcMemoryType;
    q.srcHost = c->srcHost, q.srcDevice = c->srcDevice, q.srcArray = c->srcArray;
    q.srcPitch = c->srcPitch;
    q.dstXInBytes = c->dstXInBytes, q.dstY = c->dstY, q.dstMemoryType = c->dstMemoryType;
    q.dstHost = c->dstHost, q.dstDevice = c->dstDevice, q.dstArray = c->dstArray;
    q.dstPitch = c->dstPitch;
    q.WidthInBytes = c->WidthInBytes, q.Height = c->Height, q.Depth = 1;
    return cuda_fe::copy_with_array(q, mode, st, pt);
  }
  Operand d, s;
  if (CUresult r = operand(c->dstMemoryType, c->dstHost, c->dstDevice, c->dstArray, c->dstXInBytes,
                           c->dstY, 0, c->dstPitch, 0, &d);
      r != CUDA_SUCCESS)
    return r;
  if (CUresult r = operand(c->srcMemoryType, c->srcHost, c->srcDevice, c->srcArray, c->srcXInBytes,
                           c->srcY, 0, c->srcPitch, 0, &s);
      r != CUDA_SUCCESS)
    return r;
  const size_t dpitch = c->dstPitch ? c->dstPitch : c->WidthInBytes;
  const size_t spitch = c->srcPitch ? c->srcPitch : c->WidthInBytes;
  if (c->Height > 1 && (dpitch < c->WidthInBytes || spitch < c->WidthInBytes))
    return CUDA_ERROR_INVALID_VALUE;
  return copy2d(d.p, dpitch, s.p, spitch, c->WidthInBytes, c->Height, kind_of(d, s), mode, st, pt);
}

CUresult copy_3d(const CUDA_MEMCPY3D* c, Mode mode, CUstream st = nullptr, bool pt = false) {
  RGPU_INIT();
  if (!c) return CUDA_ERROR_INVALID_VALUE;
  if (c->srcLOD || c->dstLOD) return CUDA_ERROR_INVALID_VALUE;
  if (c->dstMemoryType == CU_MEMORYTYPE_ARRAY || c->srcMemoryType == CU_MEMORYTYPE_ARRAY)
    return cuda_fe::copy_with_array(*c, mode, st, pt);
  Operand d, s;
  if (CUresult r = operand(c->dstMemoryType, c->dstHost, c->dstDevice, c->dstArray, c->dstXInBytes,
                           c->dstY, c->dstZ, c->dstPitch, c->dstHeight, &d);
      r != CUDA_SUCCESS)
    return r;
  if (CUresult r = operand(c->srcMemoryType, c->srcHost, c->srcDevice, c->srcArray, c->srcXInBytes,
                           c->srcY, c->srcZ, c->srcPitch, c->srcHeight, &s);
      r != CUDA_SUCCESS)
    return r;
  client::Client::Copy3D q;
  q.dst = d.p, q.dpitch = c->dstPitch ? c->dstPitch : c->WidthInBytes;
  q.dslice_rows = c->dstHeight ? c->dstHeight : c->Height;
  q.src = s.p, q.spitch = c->srcPitch ? c->srcPitch : c->WidthInBytes;
  q.sslice_rows = c->srcHeight ? c->srcHeight : c->Height;
  q.width = c->WidthInBytes, q.height = c->Height, q.depth = c->Depth;
  q.kind = kind_of(d, s);
  if (!q.width || !q.height || !q.depth) return CUDA_SUCCESS;
  if (mode == Mode::Sync) return to_driver(core().memcpy3d(q, nullptr));
  client::Stream str;
  if (client::Error e = cuda_fe::stream_of(st, mode == Mode::SyncThread || pt, &str);
      e != err::Success)
    return to_driver(e);
  client::Error e = core().memcpy3d(q, &str);
  if (e == err::Success && mode == Mode::SyncThread) e = core().stream_synchronize(str);
  return to_driver(e);
}

// A peer 3-D copy: each side's context names its device; an array operand is used on its own
// device, so a copy with one is an ordinary 3-D copy there.
CUresult copy_3d_peer(const CUDA_MEMCPY3D_PEER* c, Mode mode, CUstream st = nullptr,
                      bool pt = false) {
  RGPU_INIT();
  if (!c) return CUDA_ERROR_INVALID_VALUE;
  if (c->srcLOD || c->dstLOD) return CUDA_ERROR_INVALID_VALUE;
  CUDA_MEMCPY3D q{};
  q.srcXInBytes = c->srcXInBytes, q.srcY = c->srcY, q.srcZ = c->srcZ;
  q.srcMemoryType = c->srcMemoryType, q.srcHost = c->srcHost, q.srcDevice = c->srcDevice;
  q.srcArray = c->srcArray, q.srcPitch = c->srcPitch, q.srcHeight = c->srcHeight;
  q.dstXInBytes = c->dstXInBytes, q.dstY = c->dstY, q.dstZ = c->dstZ;
  q.dstMemoryType = c->dstMemoryType, q.dstHost = c->dstHost, q.dstDevice = c->dstDevice;
  q.dstArray = c->dstArray, q.dstPitch = c->dstPitch, q.dstHeight = c->dstHeight;
  q.WidthInBytes = c->WidthInBytes, q.Height = c->Height, q.Depth = c->Depth;
  if (c->dstMemoryType == CU_MEMORYTYPE_ARRAY || c->srcMemoryType == CU_MEMORYTYPE_ARRAY)
    return cuda_fe::copy_with_array(q, mode, st, pt);
  auto* dc = cuda_fe::ctx_of(c->dstContext);
  auto* sc = cuda_fe::ctx_of(c->srcContext);
  if (!dc || !sc || !core().contexts().valid(dc) || !core().contexts().valid(sc))
    return CUDA_ERROR_INVALID_CONTEXT;
  Operand d, s;
  if (CUresult r = operand(q.dstMemoryType, q.dstHost, q.dstDevice, q.dstArray, q.dstXInBytes,
                           q.dstY, q.dstZ, q.dstPitch, q.dstHeight, &d);
      r != CUDA_SUCCESS)
    return r;
  if (CUresult r = operand(q.srcMemoryType, q.srcHost, q.srcDevice, q.srcArray, q.srcXInBytes,
                           q.srcY, q.srcZ, q.srcPitch, q.srcHeight, &s);
      r != CUDA_SUCCESS)
    return r;
  client::Client::Copy3D x;
  x.dst = d.p, x.dpitch = q.dstPitch ? q.dstPitch : q.WidthInBytes;
  x.dslice_rows = q.dstHeight ? q.dstHeight : q.Height;
  x.src = s.p, x.spitch = q.srcPitch ? q.srcPitch : q.WidthInBytes;
  x.sslice_rows = q.srcHeight ? q.srcHeight : q.Height;
  x.width = q.WidthInBytes, x.height = q.Height, x.depth = q.Depth;
  x.kind = CopyKind::DeviceToDevice;
  if (!x.width || !x.height || !x.depth) return CUDA_SUCCESS;
  if (mode == Mode::Sync)
    return to_driver(core().memcpy3d_peer(x, dc->device, sc->device, nullptr));
  client::Stream str;
  if (client::Error e = cuda_fe::stream_of(st, mode == Mode::SyncThread || pt, &str);
      e != err::Success)
    return to_driver(e);
  client::Error e = core().memcpy3d_peer(x, dc->device, sc->device, &str);
  if (e == err::Success && mode == Mode::SyncThread) e = core().stream_synchronize(str);
  return to_driver(e);
}

CUresult peer(CUdeviceptr dst, CUcontext dctx, CUdeviceptr src, CUcontext sctx, size_t n, Mode mode,
              CUstream st = nullptr, bool pt = false) {
  RGPU_INIT();
  if (!dctx || !sctx) return CUDA_ERROR_INVALID_CONTEXT;
  auto* dc = cuda_fe::ctx_of(dctx);
  auto* sc = cuda_fe::ctx_of(sctx);
  if (!core().contexts().valid(dc) || !core().contexts().valid(sc))
    return CUDA_ERROR_INVALID_CONTEXT;
  if (!n) return CUDA_SUCCESS;
  if (mode == Mode::Sync)
    return to_driver(core().memcpy_peer(ptr(dst), dc->device, ptr(src), sc->device, n, nullptr));
  client::Stream s;
  if (client::Error e = cuda_fe::stream_of(st, mode == Mode::SyncThread || pt, &s);
      e != err::Success)
    return to_driver(e);
  client::Error e = core().memcpy_peer(ptr(dst), dc->device, ptr(src), sc->device, n, &s);
  if (e == err::Success && mode == Mode::SyncThread) e = core().stream_synchronize(s);
  return to_driver(e);
}

// cuMemsetD* of `height` rows of `width` elements of `elem` bytes, rows `pitch` bytes apart.
CUresult memset2d(CUdeviceptr dst, size_t pitch, uint32_t value, unsigned elem, size_t width,
                  size_t height, Mode mode, CUstream st = nullptr, bool pt = false) {
  RGPU_INIT();
  if (!width || !height) return CUDA_SUCCESS;
  if (width > SIZE_MAX / elem) return CUDA_ERROR_INVALID_VALUE;
  const size_t row = width * elem;
  if (height > 1 && pitch < row) return CUDA_ERROR_INVALID_VALUE;
  if (height > 1 && height - 1 > (SIZE_MAX - row) / pitch) return CUDA_ERROR_INVALID_VALUE;
  if ((elem > 1 && (dst % elem)) || (height > 1 && elem > 1 && pitch % elem))
    return CUDA_ERROR_INVALID_VALUE;
  uint8_t bytes[4];
  std::memcpy(bytes, &value, 4);
  bool uniform = true;
  for (unsigned i = 1; i < elem; ++i) uniform = uniform && bytes[i] == bytes[0];
  client::Stream s;
  const bool on_stream = mode != Mode::Sync;
  if (on_stream) {
    if (client::Error e = cuda_fe::stream_of(st, mode == Mode::SyncThread || pt, &s);
        e != err::Success)
      return to_driver(e);
  }
  client::Error e;
  if (!uniform && core().page_locked_range(dst, (height - 1) * pitch + row)) {
    e = core().fill_host(dst, height > 1 ? pitch : row, 0, bytes, elem, width, height, 1,
                         on_stream ? &s : nullptr);
  } else if (uniform) {
    if (height == 1)
      e = on_stream ? core().memset_async(ptr(dst), bytes[0], row, s)
                    : core().memset(ptr(dst), bytes[0], row);
    else
      e = core().memset3d(ptr(dst), pitch, height, bytes[0], row, height, 1,
                          on_stream ? &s : nullptr);
  } else {
    // The pattern as host bytes for every row; the copy takes them at the call.
    std::vector<uint8_t> pattern(row * height);
    for (size_t i = 0; i < pattern.size(); i += elem) std::memcpy(&pattern[i], bytes, elem);
    if (on_stream)
      e = core().memcpy2d_async(ptr(dst), height > 1 ? pitch : row, pattern.data(), row, row,
                                height, CopyKind::HostToDevice, s);
    else
      e = core().memcpy2d(ptr(dst), height > 1 ? pitch : row, pattern.data(), row, row, height,
                          CopyKind::HostToDevice);
  }
  if (e == err::Success && mode == Mode::SyncThread) e = core().stream_synchronize(s);
  if (e != err::Success && e != err::InvalidValue && core().first_time("cuMemsetD* failed"))
    LOG_WARN(
        "cuMemsetD%u%s of %zu x %zu elements at 0x%llx (pitch %zu, %s pattern) failed: %s; "
        "later failures are not logged",
        elem * 8, height > 1 ? " (2-D)" : "", width, height, static_cast<unsigned long long>(dst),
        pitch, uniform ? "one-byte" : "multi-byte", cuda_error_name(e));
  return to_driver(e);
}

}  // namespace

// ---- 1-D copies -------------------------------------------------------------------------------
#define RGPU_COPY1D(NAME, DST, SRC, KIND)                                         \
  RGPU_CU CUresult NAME##_v2(DST dst, SRC src, size_t n) {                        \
    return copy(ptr_of(dst), cptr_of(src), n, KIND, Mode::Sync);                  \
  }                                                                               \
  RGPU_CU CUresult NAME##_v2_ptds(DST dst, SRC src, size_t n) {                   \
    return copy(ptr_of(dst), cptr_of(src), n, KIND, Mode::SyncThread);            \
  }                                                                               \
  RGPU_CU CUresult NAME##Async_v2(DST dst, SRC src, size_t n, CUstream st) {      \
    return copy(ptr_of(dst), cptr_of(src), n, KIND, Mode::Async, st);             \
  }                                                                               \
  RGPU_CU CUresult NAME##Async_v2_ptsz(DST dst, SRC src, size_t n, CUstream st) { \
    return copy(ptr_of(dst), cptr_of(src), n, KIND, Mode::Async, st, true);       \
  }

namespace {
inline void* ptr_of(CUdeviceptr p) { return ptr(p); }
inline void* ptr_of(void* p) { return p; }
inline const void* cptr_of(CUdeviceptr p) { return ptr(p); }
inline const void* cptr_of(const void* p) { return p; }
}  // namespace

RGPU_COPY1D(cuMemcpyHtoD, CUdeviceptr, const void*, CopyKind::HostToDevice)
RGPU_COPY1D(cuMemcpyDtoH, void*, CUdeviceptr, CopyKind::DeviceToHost)
RGPU_COPY1D(cuMemcpyDtoD, CUdeviceptr, CUdeviceptr, CopyKind::DeviceToDevice)

RGPU_CU CUresult cuMemcpy(CUdeviceptr dst, CUdeviceptr src, size_t n) {
  return copy(ptr(dst), ptr(src), n, CopyKind::Default, Mode::Sync);
}
RGPU_CU CUresult cuMemcpy_ptds(CUdeviceptr dst, CUdeviceptr src, size_t n) {
  return copy(ptr(dst), ptr(src), n, CopyKind::Default, Mode::SyncThread);
}
RGPU_CU CUresult cuMemcpyAsync(CUdeviceptr dst, CUdeviceptr src, size_t n, CUstream st) {
  return copy(ptr(dst), ptr(src), n, CopyKind::Default, Mode::Async, st);
}
RGPU_CU CUresult cuMemcpyAsync_ptsz(CUdeviceptr dst, CUdeviceptr src, size_t n, CUstream st) {
  return copy(ptr(dst), ptr(src), n, CopyKind::Default, Mode::Async, st, true);
}

RGPU_CU CUresult cuMemcpyPeer(CUdeviceptr dst, CUcontext dctx, CUdeviceptr src, CUcontext sctx,
                              size_t n) {
  return peer(dst, dctx, src, sctx, n, Mode::Sync);
}
RGPU_CU CUresult cuMemcpyPeer_ptds(CUdeviceptr dst, CUcontext dctx, CUdeviceptr src, CUcontext sctx,
                                   size_t n) {
  return peer(dst, dctx, src, sctx, n, Mode::SyncThread);
}
RGPU_CU CUresult cuMemcpyPeerAsync(CUdeviceptr dst, CUcontext dctx, CUdeviceptr src, CUcontext sctx,
                                   size_t n, CUstream st) {
  return peer(dst, dctx, src, sctx, n, Mode::Async, st);
}
RGPU_CU CUresult cuMemcpyPeerAsync_ptsz(CUdeviceptr dst, CUcontext dctx, CUdeviceptr src,
                                        CUcontext sctx, size_t n, CUstream st) {
  return peer(dst, dctx, src, sctx, n, Mode::Async, st, true);
}

// ---- 2-D and 3-D copies -----------------------------------------------------------------------

RGPU_CU CUresult cuMemcpy2D_v2(const CUDA_MEMCPY2D* c) { return copy_2d(c, Mode::Sync); }
RGPU_CU CUresult cuMemcpy2D_v2_ptds(const CUDA_MEMCPY2D* c) { return copy_2d(c, Mode::SyncThread); }
RGPU_CU CUresult cuMemcpy2DUnaligned_v2(const CUDA_MEMCPY2D* c) { return copy_2d(c, Mode::Sync); }
RGPU_CU CUresult cuMemcpy2DUnaligned_v2_ptds(const CUDA_MEMCPY2D* c) {
  return copy_2d(c, Mode::SyncThread);
}
RGPU_CU CUresult cuMemcpy2DAsync_v2(const CUDA_MEMCPY2D* c, CUstream st) {
  return copy_2d(c, Mode::Async, st);
}
RGPU_CU CUresult cuMemcpy2DAsync_v2_ptsz(const CUDA_MEMCPY2D* c, CUstream st) {
  return copy_2d(c, Mode::Async, st, true);
}
RGPU_CU CUresult cuMemcpy3D_v2(const CUDA_MEMCPY3D* c) { return copy_3d(c, Mode::Sync); }
RGPU_CU CUresult cuMemcpy3D_v2_ptds(const CUDA_MEMCPY3D* c) { return copy_3d(c, Mode::SyncThread); }
RGPU_CU CUresult cuMemcpy3DAsync_v2(const CUDA_MEMCPY3D* c, CUstream st) {
  return copy_3d(c, Mode::Async, st);
}
RGPU_CU CUresult cuMemcpy3DAsync_v2_ptsz(const CUDA_MEMCPY3D* c, CUstream st) {
  return copy_3d(c, Mode::Async, st, true);
}

// ---- memsets ----------------------------------------------------------------------------------
#define RGPU_MEMSET(BITS, T)                                                                       \
  RGPU_CU CUresult cuMemsetD##BITS##_v2(CUdeviceptr d, T v, size_t n) {                            \
    return memset2d(d, 0, v, BITS / 8, n, 1, Mode::Sync);                                          \
  }                                                                                                \
  RGPU_CU CUresult cuMemsetD##BITS##_v2_ptds(CUdeviceptr d, T v, size_t n) {                       \
    return memset2d(d, 0, v, BITS / 8, n, 1, Mode::SyncThread);                                    \
  }                                                                                                \
  RGPU_CU CUresult cuMemsetD##BITS##Async(CUdeviceptr d, T v, size_t n, CUstream st) {             \
    return memset2d(d, 0, v, BITS / 8, n, 1, Mode::Async, st);                                     \
  }                                                                                                \
  RGPU_CU CUresult cuMemsetD##BITS##Async_ptsz(CUdeviceptr d, T v, size_t n, CUstream st) {        \
    return memset2d(d, 0, v, BITS / 8, n, 1, Mode::Async, st, true);                               \
  }                                                                                                \
  RGPU_CU CUresult cuMemsetD2D##BITS##_v2(CUdeviceptr d, size_t p, T v, size_t w, size_t h) {      \
    return memset2d(d, p, v, BITS / 8, w, h, Mode::Sync);                                          \
  }                                                                                                \
  RGPU_CU CUresult cuMemsetD2D##BITS##_v2_ptds(CUdeviceptr d, size_t p, T v, size_t w, size_t h) { \
    return memset2d(d, p, v, BITS / 8, w, h, Mode::SyncThread);                                    \
  }                                                                                                \
  RGPU_CU CUresult cuMemsetD2D##BITS##Async(CUdeviceptr d, size_t p, T v, size_t w, size_t h,      \
                                            CUstream st) {                                         \
    return memset2d(d, p, v, BITS / 8, w, h, Mode::Async, st);                                     \
  }                                                                                                \
  RGPU_CU CUresult cuMemsetD2D##BITS##Async_ptsz(CUdeviceptr d, size_t p, T v, size_t w, size_t h, \
                                                 CUstream st) {                                    \
    return memset2d(d, p, v, BITS / 8, w, h, Mode::Async, st, true);                               \
  }

RGPU_MEMSET(8, unsigned char)
RGPU_MEMSET(16, unsigned short)
RGPU_MEMSET(32, unsigned int)

// ---- 3-D peer copies ----------------------------------------------------------------------------
RGPU_CU CUresult cuMemcpy3DPeer(const CUDA_MEMCPY3D_PEER* p) { return copy_3d_peer(p, Mode::Sync); }
RGPU_CU CUresult cuMemcpy3DPeer_ptds(const CUDA_MEMCPY3D_PEER* p) {
  return copy_3d_peer(p, Mode::SyncThread);
}
RGPU_CU CUresult cuMemcpy3DPeerAsync(const CUDA_MEMCPY3D_PEER* p, CUstream hStream) {
  return copy_3d_peer(p, Mode::Async, hStream);
}
RGPU_CU CUresult cuMemcpy3DPeerAsync_ptsz(const CUDA_MEMCPY3D_PEER* p, CUstream hStream) {
  return copy_3d_peer(p, Mode::Async, hStream, true);
}
