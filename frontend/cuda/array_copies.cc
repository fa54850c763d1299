// Copies with a CUDA array operand: 2-D/3-D descriptors (CUDA_MEMCPY2D/3D: one box of
// Client::array_copy) and the 1-D cuMemcpy{HtoA,AtoH,DtoA,AtoD,AtoA} forms (a few boxes);
// synchronously, on the thread's default stream (then waiting), or on a stream.
#include <algorithm>

#include "frontend/cuda/arrays.h"

using namespace rgpu;
using rgpu::cuda_fe::core;
using rgpu::cuda_fe::ptr;
using rgpu::cuda_fe::to_driver;
using Side = rgpu::client::Client::ArraySide;

namespace {

enum class Where { Host, Device, Unified };

// One operand: an array at (x bytes, y, z), or linear memory whose box starts (x, y, z) in.
CUresult side_of(CUmemorytype type, const void* host, CUdeviceptr dev, CUarray array, size_t x,
                 size_t y, size_t z, size_t pitch, size_t rows, const CUDA_MEMCPY3D& c, Side* out,
                 Where* where) {
  *out = Side{};
  out->x = x, out->y = y, out->z = z;
  switch (type) {
    case CU_MEMORYTYPE_ARRAY:
      out->array = cuda_fe::array_id(array);
      *where = Where::Device;
      return out->array ? CUDA_SUCCESS : CUDA_ERROR_INVALID_HANDLE;
    case CU_MEMORYTYPE_HOST:
      out->ptr = host, *where = Where::Host;
      break;
    case CU_MEMORYTYPE_DEVICE:
      out->ptr = ptr(dev), *where = Where::Device;
      break;
    case CU_MEMORYTYPE_UNIFIED:
      out->ptr = ptr(dev), *where = Where::Unified;
      break;
    default:
      return CUDA_ERROR_INVALID_VALUE;
  }
  out->pitch = pitch ? pitch : c.WidthInBytes;
  out->slice_rows = rows ? rows : c.Height;
  return CUDA_SUCCESS;
}

client::CopyKind kind_of(Where d, Where s) {
  if (d == Where::Unified || s == Where::Unified) return client::CopyKind::Default;
  if (d == Where::Device)
    return s == Where::Device ? client::CopyKind::DeviceToDevice : client::CopyKind::HostToDevice;
  return s == Where::Device ? client::CopyKind::DeviceToHost : client::CopyKind::HostToHost;
}

}  // namespace

namespace rgpu::cuda_fe {

CUresult copy_with_array(const CUDA_MEMCPY3D& c, CopyMode mode, CUstream st, bool pt) {
  RGPU_INIT();
  Side d, s;
  Where dw, sw;
  if (CUresult r = side_of(c.dstMemoryType, c.dstHost, c.dstDevice, c.dstArray, c.dstXInBytes,
                           c.dstY, c.dstZ, c.dstPitch, c.dstHeight, c, &d, &dw);
      r != CUDA_SUCCESS)
    return r;
  if (CUresult r = side_of(c.srcMemoryType, c.srcHost, c.srcDevice, c.srcArray, c.srcXInBytes,
                           c.srcY, c.srcZ, c.srcPitch, c.srcHeight, c, &s, &sw);
      r != CUDA_SUCCESS)
    return r;
  const size_t height = c.Height ? c.Height : 1, depth = c.Depth ? c.Depth : 1;
  if (!c.WidthInBytes) return CUDA_SUCCESS;
  const client::CopyKind kind = kind_of(dw, sw);
  if (mode == CopyMode::Sync)
    return to_driver(core().array_copy(d, s, c.WidthInBytes, height, depth, kind, nullptr));
  client::Stream str;
  if (client::Error e = stream_of(st, mode == CopyMode::SyncThread || pt, &str); e != err::Success)
    return to_driver(e);
  client::Error e = core().array_copy(d, s, c.WidthInBytes, height, depth, kind, &str);
  if (e == err::Success && mode == CopyMode::SyncThread) e = core().stream_synchronize(str);
  return to_driver(e);
}

}  // namespace rgpu::cuda_fe

// ---- the 1-D forms: `count` bytes from byte `offset` of an array on, running on across its rows
// (and slices); split into boxes that stay within one slice of every array operand.

namespace {

struct Linear1D {
  CUarray array = nullptr;  // or linear memory at `p`
  const void* p = nullptr;
  size_t offset = 0;
  bool device = false;
};

// An array's row bytes and rows per slice.
bool geometry(CUarray a, size_t* row, size_t* rows) {
  client::Client::ArrayRecord r;
  if (!core().array_record(cuda_fe::array_id(a), false, &r)) return false;
  *row = r.desc.width * r.desc.element;
  *rows = r.desc.height ? r.desc.height : 1;
  return true;
}

CUresult copy_1d(Linear1D dst, Linear1D src, size_t count, cuda_fe::CopyMode mode, CUstream st,
                 bool pt) {
  RGPU_INIT();
  size_t drow = 0, drows = 0, srow = 0, srows = 0;
  if ((dst.array && !geometry(dst.array, &drow, &drows)) ||
      (src.array && !geometry(src.array, &srow, &srows)))
    return CUDA_ERROR_INVALID_HANDLE;
  client::Stream str;
  const client::Stream* s = nullptr;
  if (mode != cuda_fe::CopyMode::Sync) {
    if (client::Error e = cuda_fe::stream_of(st, mode == cuda_fe::CopyMode::SyncThread || pt, &str);
        e != err::Success)
      return to_driver(e);
    s = &str;
  }
  const client::CopyKind kind =
      dst.device ? (src.device ? client::CopyKind::DeviceToDevice : client::CopyKind::HostToDevice)
                 : (src.device ? client::CopyKind::DeviceToHost : client::CopyKind::HostToHost);
  size_t done = 0;
  while (done < count) {
    // Where each array side is: byte x of row y of slice z.
    auto at = [](size_t off, size_t row, size_t rows, Side* side) {
      side->x = off % row;
      side->y = off / row % rows;
      side->z = off / row / rows;
    };
    Side d{}, sr{};
    size_t n = count - done, rows = 1;
    if (dst.array) {
      d.array = cuda_fe::array_id(dst.array);
      at(dst.offset + done, drow, drows, &d);
      n = std::min(n, drow - d.x);
    }
    if (src.array) {
      sr.array = cuda_fe::array_id(src.array);
      at(src.offset + done, srow, srows, &sr);
      n = std::min(n, srow - sr.x);
    }
    // Whole rows at once where every array side is at a row's start with the same row width.
    const bool whole = (!dst.array || d.x == 0) && (!src.array || sr.x == 0) &&
                       (!dst.array || !src.array || drow == srow) && (dst.array || src.array);
    if (whole) {
      size_t row = dst.array ? drow : srow;
      rows = (count - done) / row;
      if (dst.array) rows = std::min(rows, drows - d.y);
      if (src.array) rows = std::min(rows, srows - sr.y);
      if (rows < 1) rows = 1;
      if (rows > 1) n = row;
    }
    if (!dst.array) {
      d.ptr = static_cast<const char*>(dst.p) + dst.offset + done;
      d.pitch = n, d.slice_rows = rows;
    }
    if (!src.array) {
      sr.ptr = static_cast<const char*>(src.p) + src.offset + done;
      sr.pitch = n, sr.slice_rows = rows;
    }
    if (client::Error e = core().array_copy(d, sr, n, rows, 1, kind, s); e != err::Success)
      return to_driver(e);
    done += n * rows;
  }
  if (mode == cuda_fe::CopyMode::SyncThread) return to_driver(core().stream_synchronize(str));
  return CUDA_SUCCESS;
}

Linear1D arr(CUarray a, size_t off) { return Linear1D{a, nullptr, off, true}; }
Linear1D host(const void* p) { return Linear1D{nullptr, p, 0, false}; }
Linear1D dev(CUdeviceptr p) { return Linear1D{nullptr, cuda_fe::ptr(p), 0, true}; }

using M = cuda_fe::CopyMode;

}  // namespace

RGPU_CU CUresult cuMemcpyHtoA_v2(CUarray dstArray, size_t dstOffset, const void* srcHost,
                                 size_t ByteCount) {
  return copy_1d(arr(dstArray, dstOffset), host(srcHost), ByteCount, M::Sync, nullptr, false);
}
RGPU_CU CUresult cuMemcpyHtoA_v2_ptds(CUarray dstArray, size_t dstOffset, const void* srcHost,
                                      size_t ByteCount) {
  return copy_1d(arr(dstArray, dstOffset), host(srcHost), ByteCount, M::SyncThread, nullptr, true);
}
RGPU_CU CUresult cuMemcpyHtoAAsync_v2(CUarray dstArray, size_t dstOffset, const void* srcHost,
                                      size_t ByteCount, CUstream hStream) {
  return copy_1d(arr(dstArray, dstOffset), host(srcHost), ByteCount, M::Async, hStream, false);
}
RGPU_CU CUresult cuMemcpyHtoAAsync_v2_ptsz(CUarray dstArray, size_t dstOffset, const void* srcHost,
                                           size_t ByteCount, CUstream hStream) {
  return copy_1d(arr(dstArray, dstOffset), host(srcHost), ByteCount, M::Async, hStream, true);
}
RGPU_CU CUresult cuMemcpyAtoH_v2(void* dstHost, CUarray srcArray, size_t srcOffset,
                                 size_t ByteCount) {
  return copy_1d(host(dstHost), arr(srcArray, srcOffset), ByteCount, M::Sync, nullptr, false);
}
RGPU_CU CUresult cuMemcpyAtoH_v2_ptds(void* dstHost, CUarray srcArray, size_t srcOffset,
                                      size_t ByteCount) {
  return copy_1d(host(dstHost), arr(srcArray, srcOffset), ByteCount, M::SyncThread, nullptr, true);
}
RGPU_CU CUresult cuMemcpyAtoHAsync_v2(void* dstHost, CUarray srcArray, size_t srcOffset,
                                      size_t ByteCount, CUstream hStream) {
  return copy_1d(host(dstHost), arr(srcArray, srcOffset), ByteCount, M::Async, hStream, false);
}
RGPU_CU CUresult cuMemcpyAtoHAsync_v2_ptsz(void* dstHost, CUarray srcArray, size_t srcOffset,
                                           size_t ByteCount, CUstream hStream) {
  return copy_1d(host(dstHost), arr(srcArray, srcOffset), ByteCount, M::Async, hStream, true);
}
RGPU_CU CUresult cuMemcpyDtoA_v2(CUarray dstArray, size_t dstOffset, CUdeviceptr srcDevice,
                                 size_t ByteCount) {
  return copy_1d(arr(dstArray, dstOffset), dev(srcDevice), ByteCount, M::Sync, nullptr, false);
}
RGPU_CU CUresult cuMemcpyDtoA_v2_ptds(CUarray dstArray, size_t dstOffset, CUdeviceptr srcDevice,
                                      size_t ByteCount) {
  return copy_1d(arr(dstArray, dstOffset), dev(srcDevice), ByteCount, M::SyncThread, nullptr, true);
}
RGPU_CU CUresult cuMemcpyAtoD_v2(CUdeviceptr dstDevice, CUarray srcArray, size_t srcOffset,
                                 size_t ByteCount) {
  return copy_1d(dev(dstDevice), arr(srcArray, srcOffset), ByteCount, M::Sync, nullptr, false);
}
RGPU_CU CUresult cuMemcpyAtoD_v2_ptds(CUdeviceptr dstDevice, CUarray srcArray, size_t srcOffset,
                                      size_t ByteCount) {
  return copy_1d(dev(dstDevice), arr(srcArray, srcOffset), ByteCount, M::SyncThread, nullptr, true);
}
RGPU_CU CUresult cuMemcpyAtoA_v2(CUarray dstArray, size_t dstOffset, CUarray srcArray,
                                 size_t srcOffset, size_t ByteCount) {
  return copy_1d(arr(dstArray, dstOffset), arr(srcArray, srcOffset), ByteCount, M::Sync, nullptr,
                 false);
}
RGPU_CU CUresult cuMemcpyAtoA_v2_ptds(CUarray dstArray, size_t dstOffset, CUarray srcArray,
                                      size_t srcOffset, size_t ByteCount) {
  return copy_1d(arr(dstArray, dstOffset), arr(srcArray, srcOffset), ByteCount, M::SyncThread,
                 nullptr, true);
}
