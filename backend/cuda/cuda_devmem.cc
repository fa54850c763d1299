#include "backend/cuda/cuda_devmem.h"

#include <string>

namespace rgpu::backend {

Status cuda_device_config(const CudaDriver& drv, CUdevice dev, CUdevice peer, Executor::ConfigOp op,
                          uint32_t key, uint64_t& value) {
  using Op = Executor::ConfigOp;
  auto check = [&](CUresult r, const char* what) {
    if (r == CUDA_SUCCESS) return Status::success();
    // CUresult and cudaError_t share their numbers for every code these calls return.
    return Status::fail(static_cast<CudaError>(r), std::string(what) + ": " + drv.describe(r));
  };
  switch (op) {
    case Op::SetLimit:
      return check(drv.cuCtxSetLimit(static_cast<CUlimit>(key), static_cast<size_t>(value)),
                   "cuCtxSetLimit");
    case Op::GetLimit: {
      size_t v = 0;
      Status s = check(drv.cuCtxGetLimit(&v, static_cast<CUlimit>(key)), "cuCtxGetLimit");
      value = v;
      return s;
    }
    case Op::SetCacheConfig:
      return check(drv.cuCtxSetCacheConfig(static_cast<CUfunc_cache>(value)),
                   "cuCtxSetCacheConfig");
    case Op::GetCacheConfig: {
      CUfunc_cache c = CU_FUNC_CACHE_PREFER_NONE;
      Status s = check(drv.cuCtxGetCacheConfig(&c), "cuCtxGetCacheConfig");
      value = static_cast<uint64_t>(c);
      return s;
    }
    case Op::SetSharedMemConfig:
      return check(drv.cuCtxSetSharedMemConfig(static_cast<CUsharedconfig>(value)),
                   "cuCtxSetSharedMemConfig");
    case Op::GetSharedMemConfig: {
      CUsharedconfig c = CU_SHARED_MEM_CONFIG_FOUR_BYTE_BANK_SIZE;
      Status s = check(drv.cuCtxGetSharedMemConfig(&c), "cuCtxGetSharedMemConfig");
      value = static_cast<uint64_t>(c);
      return s;
    }
    case Op::ProfilerStart:
      return check(drv.cuProfilerStart(), "cuProfilerStart");
    case Op::ProfilerStop:
      return check(drv.cuProfilerStop(), "cuProfilerStop");
    case Op::ResetPersistingL2:
      return check(drv.cuCtxResetPersistingL2Cache(), "cuCtxResetPersistingL2Cache");
    case Op::P2PAttribute: {
      int v = 0;
      Status s =
          check(drv.cuDeviceGetP2PAttribute(&v, static_cast<CUdevice_P2PAttribute>(key), dev, peer),
                "cuDeviceGetP2PAttribute");
      value = static_cast<uint64_t>(static_cast<int64_t>(v));
      return s;
    }
  }
  return Status::fail(err::InvalidValue,
                      "unknown device setting " + std::to_string(static_cast<uint32_t>(op)));
}

}  // namespace rgpu::backend
