// Small driver calls NVIDIA's libraries make (issue 12, drvlibs): a stream's context with its green
// context (none: rgpu has no green contexts), setting CU_POINTER_ATTRIBUTE_SYNC_MEMOPS, whether a
// function is loaded / loading it, and the legacy device queries (compute capability, the
// CUdevprop block, and the first, 32-bit cuDeviceTotalMem).
#include <climits>
#include <cstring>

#include "frontend/cuda/api.h"

using namespace rgpu;
using rgpu::cuda_fe::core;
using rgpu::cuda_fe::function_of;
using rgpu::cuda_fe::to_driver;

namespace {

// CUdevice_attribute numbers.
constexpr uint32_t kMaxThreadsPerBlock = 1, kMaxBlockDimX = 2, kMaxGridDimX = 5,
                   kSharedPerBlock = 8, kTotalConstant = 9, kWarpSize = 10, kMaxPitch = 11,
                   kRegsPerBlock = 12, kClockRate = 13, kTextureAlignment = 14, kCcMajor = 75,
                   kCcMinor = 76;

CUresult info_of(CUdevice dev, const client::DeviceInfo** out) {
  RGPU_INIT();
  return to_driver(core().device_info(dev, out));
}

CUresult stream_ctx_v2(CUstream st, CUcontext* pctx, CUgreenCtx* green, bool pt) {
  RGPU_INIT();
  if (!pctx || !green) return CUDA_ERROR_INVALID_VALUE;
  const auto h = reinterpret_cast<uintptr_t>(st);
  client::Context* current = core().contexts().current();
  // The special handles name the calling thread's current context.
  if ((h == 0 || h == cuda_fe::kStreamLegacy || h == cuda_fe::kStreamPerThread) && !current)
    return CUDA_ERROR_INVALID_CONTEXT;
  client::Stream s;
  if (client::Error e = cuda_fe::stream_of(st, pt, &s); e != err::Success) return to_driver(e);
  client::Context* c = s.ctx ? s.ctx : current;
  if (!c) c = core().contexts().primary(s.device);
  *pctx = cuda_fe::cu(c);
  *green = nullptr;
  return CUDA_SUCCESS;
}

}  // namespace

RGPU_CU CUresult cuStreamGetCtx_v2(CUstream st, CUcontext* pCtx, CUgreenCtx* pGreenCtx) {
  return stream_ctx_v2(st, pCtx, pGreenCtx, false);
}
RGPU_CU CUresult cuStreamGetCtx_v2_ptsz(CUstream st, CUcontext* pCtx, CUgreenCtx* pGreenCtx) {
  return stream_ctx_v2(st, pCtx, pGreenCtx, true);
}

// Only CU_POINTER_ATTRIBUTE_SYNC_MEMOPS can be set (cuda.h), on memory the driver allocated.
// rgpu's synchronous copies complete before they return except small host-to-device ones (eager,
// see docs/compatibility.md); setting the attribute waits for what is pending on the memory's
// device, as the driver waits for pending synchronous operations.
RGPU_CU CUresult cuPointerSetAttribute(const void* value, CUpointer_attribute attribute,
                                       CUdeviceptr ptr) {
  RGPU_INIT();
  int current = 0;
  if (CUresult r = to_driver(cuda_fe::current_device(&current)); r != CUDA_SUCCESS) return r;
  int a;
  std::memcpy(&a, &attribute, sizeof a);
  if (!value || a != CU_POINTER_ATTRIBUTE_SYNC_MEMOPS) return CUDA_ERROR_INVALID_VALUE;
  const client::PointerInfo pi = core().pointer_info(cuda_fe::ptr(ptr));
  if (pi.type != client::MemoryType::Device && pi.type != client::MemoryType::Managed)
    return CUDA_ERROR_INVALID_VALUE;
  return to_driver(core().synchronize(pi.device));
}

RGPU_CU CUresult cuFuncIsLoaded(CUfunctionLoadingState* state, CUfunction function) {
  RGPU_INIT();
  if (!state) return CUDA_ERROR_INVALID_VALUE;
  client::Function* f = function_of(function);
  if (!f) return CUDA_ERROR_INVALID_HANDLE;
  // Loaded once resolved on the current device (its first use there, or cuFuncLoad).
  int dev = 0;
  if (CUresult r = to_driver(cuda_fe::current_device(&dev)); r != CUDA_SUCCESS) return r;
  *state = core().kernel_resolved(f, dev) ? CU_FUNCTION_LOADING_STATE_LOADED
                                          : CU_FUNCTION_LOADING_STATE_UNLOADED;
  return CUDA_SUCCESS;
}

RGPU_CU CUresult cuFuncLoad(CUfunction function) {
  RGPU_INIT();
  client::Function* f = function_of(function);
  if (!f) return CUDA_ERROR_INVALID_HANDLE;
  int dev = 0;
  if (CUresult r = to_driver(cuda_fe::current_device(&dev)); r != CUDA_SUCCESS) return r;
  uint32_t id = 0;
  const client::KernelInfo* k = nullptr;
  return to_driver(core().resolved_kernel(f, dev, &id, &k));
}

RGPU_CU CUresult cuDeviceComputeCapability(int* major, int* minor, CUdevice dev) {
  if (!major || !minor) return CUDA_ERROR_INVALID_VALUE;
  const client::DeviceInfo* info = nullptr;
  if (CUresult r = info_of(dev, &info); r != CUDA_SUCCESS) return r;
  *major = info->attr(kCcMajor);
  *minor = info->attr(kCcMinor);
  return CUDA_SUCCESS;
}

RGPU_CU CUresult cuDeviceGetProperties(CUdevprop* prop, CUdevice dev) {
  if (!prop) return CUDA_ERROR_INVALID_VALUE;
  const client::DeviceInfo* info = nullptr;
  if (CUresult r = info_of(dev, &info); r != CUDA_SUCCESS) return r;
  CUdevprop p{};
  p.maxThreadsPerBlock = info->attr(kMaxThreadsPerBlock);
  for (uint32_t i = 0; i < 3; ++i) {
    p.maxThreadsDim[i] = info->attr(kMaxBlockDimX + i);
    p.maxGridSize[i] = info->attr(kMaxGridDimX + i);
  }
  p.sharedMemPerBlock = info->attr(kSharedPerBlock);
  p.totalConstantMemory = info->attr(kTotalConstant);
  p.SIMDWidth = info->attr(kWarpSize);
  p.memPitch = info->attr(kMaxPitch);
  p.regsPerBlock = info->attr(kRegsPerBlock);
  p.clockRate = info->attr(kClockRate);
  p.textureAlign = info->attr(kTextureAlignment);
  *prop = p;
  return CUDA_SUCCESS;
}

// The first version (CUDA 2.x's 32-bit ABI, cudaTypedefs.h's PFN_cuDeviceTotalMem_v2000): the
// size in an unsigned int; memory beyond 4 GiB saturates.
#undef cuDeviceTotalMem
RGPU_CU CUresult cuDeviceTotalMem(unsigned int* bytes, CUdevice dev) {
  if (!bytes) return CUDA_ERROR_INVALID_VALUE;
  const client::DeviceInfo* info = nullptr;
  if (CUresult r = info_of(dev, &info); r != CUDA_SUCCESS) return r;
  *bytes = info->total_mem > UINT_MAX ? UINT_MAX : static_cast<unsigned int>(info->total_mem);
  return CUDA_SUCCESS;
}
