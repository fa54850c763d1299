// 2-D/3-D copies (CUDA_MEMCPY2D/3D) with a CUDA array operand: one box of Client::array_copy,
// synchronously, on the thread's default stream (then waiting), or on a stream.
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
