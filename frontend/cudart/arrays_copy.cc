// Copies with CUDA array operands (issue 11, item 2): cudaMemcpy2D{To,From}Array(Async),
// cudaMemcpy2DArrayToArray, the deprecated 1-D cudaMemcpy{To,From}Array(Async) and
// cudaMemcpyArrayToArray (whose bytes run on across rows), their per-thread entry points, and
// cudaMemcpy3D(Async)/cudaMemcpy3DPeer(Async) when an operand is an array.  Each becomes one or
// a few boxes of Client::array_copy.
#include <algorithm>

#include "frontend/cudart/arrays.h"

using namespace rgpu;
using rgpu::cudart::array_id;
using rgpu::cudart::core;
using rgpu::cudart::ret;

#define RGPU_EXPORT extern "C" __attribute__((visibility("default")))

namespace {

using Side = client::Client::ArraySide;

Side array_side(cudaArray_const_t a, size_t x, size_t y, size_t z = 0) {
  return Side{array_id(a), nullptr, 0, 0, x, y, z};
}
Side linear(const void* p, size_t pitch, size_t rows = 1) {
  return Side{0, p, pitch, rows, 0, 0, 0};
}

// Runs one copy (or several, `op`) synchronously (no stream: as cudaMemcpy; per-thread: on the
// thread's stream, then waits) or on a stream.
template <class Op>
cudaError_t run(cudaStream_t stream, bool async, bool per_thread, Op op) {
  if (!async && !per_thread) return ret(op(nullptr));
  client::Stream s;
  if (CudaError e = cudart::stream_arg(stream, per_thread, &s); e != err::Success) return ret(e);
  CudaError e = op(&s);
  if (e == err::Success && !async) e = core().stream_synchronize(s);
  return ret(e);
}

client::CopyKind kind_of(cudaMemcpyKind k) { return static_cast<client::CopyKind>(k); }

bool valid_array(cudaArray_const_t a) { return array_id(a) != 0; }

cudaError_t to_array_2d(cudaArray_t dst, size_t x, size_t y, const void* src, size_t spitch,
                        size_t width, size_t height, cudaMemcpyKind kind, cudaStream_t stream,
                        bool async, bool per_thread) {
  if (!valid_array(dst)) return ret(client::errc::InvalidResourceHandle);
  if (height > 1 && width > spitch) return ret(err::InvalidPitchValue);
  return run(stream, async, per_thread, [&](const client::Stream* s) {
    return core().array_copy(array_side(dst, x, y), linear(src, spitch), width, height, 1,
                             kind_of(kind), s);
  });
}

cudaError_t from_array_2d(void* dst, size_t dpitch, cudaArray_const_t src, size_t x, size_t y,
                          size_t width, size_t height, cudaMemcpyKind kind, cudaStream_t stream,
                          bool async, bool per_thread) {
  if (!valid_array(src)) return ret(client::errc::InvalidResourceHandle);
  if (height > 1 && width > dpitch) return ret(err::InvalidPitchValue);
  return run(stream, async, per_thread, [&](const client::Stream* s) {
    return core().array_copy(linear(dst, dpitch), array_side(src, x, y), width, height, 1,
                             kind_of(kind), s);
  });
}

cudaError_t array_to_array_2d(cudaArray_t dst, size_t dx, size_t dy, cudaArray_const_t src,
                              size_t sx, size_t sy, size_t width, size_t height,
                              cudaMemcpyKind kind, bool per_thread) {
  if (!valid_array(dst) || !valid_array(src)) return ret(client::errc::InvalidResourceHandle);
  if (kind != cudaMemcpyDeviceToDevice && kind != cudaMemcpyDefault)
    return ret(err::InvalidMemcpyDirection);
  return run(nullptr, false, per_thread, [&](const client::Stream* s) {
    return core().array_copy(array_side(dst, dx, dy), array_side(src, sx, sy), width, height, 1,
                             kind_of(kind), s);
  });
}

// Row width in bytes of an array.
bool row_bytes(cudaArray_const_t a, size_t* row) {
  client::Client::ArrayRecord r;
  if (!core().array_record(array_id(a), false, &r)) return false;
  *row = r.desc.width * r.desc.element;
  return true;
}

// The deprecated 1-D forms: `count` bytes from (x, y) on, running on across the array's rows:
// split into pieces that stay within one row of every array operand.
cudaError_t linear_1d(cudaArray_const_t dst_a, size_t dx, size_t dy, void* dst_p,
                      cudaArray_const_t src_a, size_t sx, size_t sy, const void* src_p,
                      size_t count, cudaMemcpyKind kind, cudaStream_t stream, bool async,
                      bool per_thread) {
  size_t drow = 0, srow = 0;
  if ((dst_a && !row_bytes(dst_a, &drow)) || (src_a && !row_bytes(src_a, &srow)))
    return ret(client::errc::InvalidResourceHandle);
  if ((dst_a && dx >= drow && count) || (src_a && sx >= srow && count))
    return ret(err::InvalidValue);
  return run(stream, async, per_thread, [&](const client::Stream* s) {
    size_t done = 0;
    while (done < count) {
      size_t n = count - done;
      if (dst_a) n = std::min(n, drow - dx);
      if (src_a) n = std::min(n, srow - sx);
      // Whole rows at once where both sides are at a row's start with the same width.
      size_t rows = 1;
      if (dst_a && src_a && dx == 0 && sx == 0 && drow == srow)
        rows = (count - done) / drow;
      else if (dst_a && !src_a && dx == 0)
        rows = (count - done) / drow;
      else if (src_a && !dst_a && sx == 0)
        rows = (count - done) / srow;
      if (rows < 1) rows = 1;
      size_t pitch = rows > 1 ? n : 0;
      Side d = dst_a ? array_side(dst_a, dx, dy)
                     : linear(static_cast<char*>(dst_p) + done, std::max(pitch, n));
      Side sr = src_a ? array_side(src_a, sx, sy)
                      : linear(static_cast<const char*>(src_p) + done, std::max(pitch, n));
      CudaError e = core().array_copy(d, sr, n, rows, 1, kind_of(kind), s);
      if (e != err::Success) return e;
      done += n * rows;
      if (dst_a) {
        dx += n;
        if (dx == drow || rows > 1) dx = 0, dy += rows;
      }
      if (src_a) {
        sx += n;
        if (sx == srow || rows > 1) sx = 0, sy += rows;
      }
    }
    return err::Success;
  });
}

}  // namespace

namespace rgpu::cudart {

// cudaMemcpy3D with an array operand: positions and the extent's width count elements.
cudaError_t memcpy3d_array(const cudaMemcpy3DParms* p, cudaStream_t stream, bool async,
                           bool per_thread) {
  if (!p) return ret(err::InvalidValue);
  if ((p->srcArray && p->srcPtr.ptr) || (p->dstArray && p->dstPtr.ptr))
    return ret(err::InvalidValue);
  client::Client::ArrayRecord r;
  cudaArray_const_t any = p->srcArray ? p->srcArray : p->dstArray;
  if (!core().array_record(array_id(any), false, &r))
    return ret(client::errc::InvalidResourceHandle);
  size_t elem = r.desc.element;
  auto side = [&](cudaArray_const_t a, const cudaPitchedPtr& ptr, const cudaPos& pos) {
    if (a) return array_side(a, pos.x * elem, pos.y, pos.z);
    return Side{0, ptr.ptr, ptr.pitch, ptr.ysize, pos.x, pos.y, pos.z};
  };
  if ((p->srcArray && !valid_array(p->srcArray)) || (p->dstArray && !valid_array(p->dstArray)))
    return ret(client::errc::InvalidResourceHandle);
  Side src = side(p->srcArray, p->srcPtr, p->srcPos);
  Side dst = side(p->dstArray, p->dstPtr, p->dstPos);
  // Linear operands: a box, so a 2-D copy (depth 1) needs no slice height.
  if (!src.array && src.slice_rows == 0) src.slice_rows = p->extent.height;
  if (!dst.array && dst.slice_rows == 0) dst.slice_rows = p->extent.height;
  size_t height = std::max<size_t>(p->extent.height, 1),
         depth = std::max<size_t>(p->extent.depth, 1);
  if (p->extent.width == 0 || p->extent.height == 0 || p->extent.depth == 0) return cudaSuccess;
  return run(stream, async, per_thread, [&](const client::Stream* s) {
    return core().array_copy(dst, src, p->extent.width * elem, height, depth, kind_of(p->kind), s);
  });
}

}  // namespace rgpu::cudart

extern "C" {

cudaError_t cudaMemcpy2DToArray(cudaArray_t dst, size_t wOffset, size_t hOffset, const void* src,
                                size_t spitch, size_t width, size_t height, cudaMemcpyKind kind) {
  return to_array_2d(dst, wOffset, hOffset, src, spitch, width, height, kind, nullptr, false,
                     false);
}
cudaError_t cudaMemcpy2DToArrayAsync(cudaArray_t dst, size_t wOffset, size_t hOffset,
                                     const void* src, size_t spitch, size_t width, size_t height,
                                     cudaMemcpyKind kind, cudaStream_t stream) {
  return to_array_2d(dst, wOffset, hOffset, src, spitch, width, height, kind, stream, true, false);
}
cudaError_t cudaMemcpy2DFromArray(void* dst, size_t dpitch, cudaArray_const_t src, size_t wOffset,
                                  size_t hOffset, size_t width, size_t height,
                                  cudaMemcpyKind kind) {
  return from_array_2d(dst, dpitch, src, wOffset, hOffset, width, height, kind, nullptr, false,
                       false);
}
cudaError_t cudaMemcpy2DFromArrayAsync(void* dst, size_t dpitch, cudaArray_const_t src,
                                       size_t wOffset, size_t hOffset, size_t width, size_t height,
                                       cudaMemcpyKind kind, cudaStream_t stream) {
  return from_array_2d(dst, dpitch, src, wOffset, hOffset, width, height, kind, stream, true,
                       false);
}
cudaError_t cudaMemcpy2DArrayToArray(cudaArray_t dst, size_t wOffsetDst, size_t hOffsetDst,
                                     cudaArray_const_t src, size_t wOffsetSrc, size_t hOffsetSrc,
                                     size_t width, size_t height, cudaMemcpyKind kind) {
  return array_to_array_2d(dst, wOffsetDst, hOffsetDst, src, wOffsetSrc, hOffsetSrc, width, height,
                           kind, false);
}
cudaError_t cudaMemcpyToArray(cudaArray_t dst, size_t wOffset, size_t hOffset, const void* src,
                              size_t count, cudaMemcpyKind kind) {
  return linear_1d(dst, wOffset, hOffset, nullptr, nullptr, 0, 0, src, count, kind, nullptr, false,
                   false);
}
cudaError_t cudaMemcpyToArrayAsync(cudaArray_t dst, size_t wOffset, size_t hOffset, const void* src,
                                   size_t count, cudaMemcpyKind kind, cudaStream_t stream) {
  return linear_1d(dst, wOffset, hOffset, nullptr, nullptr, 0, 0, src, count, kind, stream, true,
                   false);
}
cudaError_t cudaMemcpyFromArray(void* dst, cudaArray_const_t src, size_t wOffset, size_t hOffset,
                                size_t count, cudaMemcpyKind kind) {
  return linear_1d(nullptr, 0, 0, dst, src, wOffset, hOffset, nullptr, count, kind, nullptr, false,
                   false);
}
cudaError_t cudaMemcpyFromArrayAsync(void* dst, cudaArray_const_t src, size_t wOffset,
                                     size_t hOffset, size_t count, cudaMemcpyKind kind,
                                     cudaStream_t stream) {
  return linear_1d(nullptr, 0, 0, dst, src, wOffset, hOffset, nullptr, count, kind, stream, true,
                   false);
}
cudaError_t cudaMemcpyArrayToArray(cudaArray_t dst, size_t wOffsetDst, size_t hOffsetDst,
                                   cudaArray_const_t src, size_t wOffsetSrc, size_t hOffsetSrc,
                                   size_t count, cudaMemcpyKind kind) {
  return linear_1d(dst, wOffsetDst, hOffsetDst, nullptr, src, wOffsetSrc, hOffsetSrc, nullptr,
                   count, kind, nullptr, false, false);
}

}  // extern "C"

// Per-thread default stream entry points (--default-stream per-thread).
RGPU_EXPORT cudaError_t cudaMemcpy2DToArray_ptds(cudaArray_t dst, size_t x, size_t y,
                                                 const void* src, size_t spitch, size_t w, size_t h,
                                                 cudaMemcpyKind k) {
  return to_array_2d(dst, x, y, src, spitch, w, h, k, nullptr, false, true);
}
RGPU_EXPORT cudaError_t cudaMemcpy2DToArrayAsync_ptsz(cudaArray_t dst, size_t x, size_t y,
                                                      const void* src, size_t spitch, size_t w,
                                                      size_t h, cudaMemcpyKind k, cudaStream_t s) {
  return to_array_2d(dst, x, y, src, spitch, w, h, k, s, true, true);
}
RGPU_EXPORT cudaError_t cudaMemcpy2DFromArray_ptds(void* dst, size_t dpitch, cudaArray_const_t src,
                                                   size_t x, size_t y, size_t w, size_t h,
                                                   cudaMemcpyKind k) {
  return from_array_2d(dst, dpitch, src, x, y, w, h, k, nullptr, false, true);
}
RGPU_EXPORT cudaError_t cudaMemcpy2DFromArrayAsync_ptsz(void* dst, size_t dpitch,
                                                        cudaArray_const_t src, size_t x, size_t y,
                                                        size_t w, size_t h, cudaMemcpyKind k,
                                                        cudaStream_t s) {
  return from_array_2d(dst, dpitch, src, x, y, w, h, k, s, true, true);
}
RGPU_EXPORT cudaError_t cudaMemcpy2DArrayToArray_ptds(cudaArray_t dst, size_t dx, size_t dy,
                                                      cudaArray_const_t src, size_t sx, size_t sy,
                                                      size_t w, size_t h, cudaMemcpyKind k) {
  return array_to_array_2d(dst, dx, dy, src, sx, sy, w, h, k, true);
}
RGPU_EXPORT cudaError_t cudaMemcpyToArray_ptds(cudaArray_t dst, size_t x, size_t y, const void* src,
                                               size_t count, cudaMemcpyKind k) {
  return linear_1d(dst, x, y, nullptr, nullptr, 0, 0, src, count, k, nullptr, false, true);
}
RGPU_EXPORT cudaError_t cudaMemcpyToArrayAsync_ptsz(cudaArray_t dst, size_t x, size_t y,
                                                    const void* src, size_t count, cudaMemcpyKind k,
                                                    cudaStream_t s) {
  return linear_1d(dst, x, y, nullptr, nullptr, 0, 0, src, count, k, s, true, true);
}
RGPU_EXPORT cudaError_t cudaMemcpyFromArray_ptds(void* dst, cudaArray_const_t src, size_t x,
                                                 size_t y, size_t count, cudaMemcpyKind k) {
  return linear_1d(nullptr, 0, 0, dst, src, x, y, nullptr, count, k, nullptr, false, true);
}
RGPU_EXPORT cudaError_t cudaMemcpyFromArrayAsync_ptsz(void* dst, cudaArray_const_t src, size_t x,
                                                      size_t y, size_t count, cudaMemcpyKind k,
                                                      cudaStream_t s) {
  return linear_1d(nullptr, 0, 0, dst, src, x, y, nullptr, count, k, s, true, true);
}
RGPU_EXPORT cudaError_t cudaMemcpyArrayToArray_ptds(cudaArray_t dst, size_t dx, size_t dy,
                                                    cudaArray_const_t src, size_t sx, size_t sy,
                                                    size_t count, cudaMemcpyKind k) {
  return linear_1d(dst, dx, dy, nullptr, src, sx, sy, nullptr, count, k, nullptr, false, true);
}
