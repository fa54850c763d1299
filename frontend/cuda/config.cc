// Device configuration through the current context (cache and shared-memory configuration, the
// persisting L2 lines, the profiler), peer access between contexts, atomic capabilities and
// GPUDirect RDMA flushes: the same client-core calls as the runtime's cudaDevice* forms.
#include "frontend/cuda/api.h"
#include "proto/messages_devmem.h"

using namespace rgpu;
using rgpu::cuda_fe::core;
using rgpu::cuda_fe::ctx_of;
using rgpu::cuda_fe::to_driver;
using Op = rgpu::proto::DeviceConfigOp;

namespace {

// A DeviceConfig operation on the current context's device.
CUresult config(Op op, uint64_t* value) {
  RGPU_INIT();
  int dev = 0;
  if (client::Error e = cuda_fe::current_device(&dev); e != err::Success) return to_driver(e);
  return to_driver(core().device_config(dev, static_cast<uint32_t>(op), 0, value));
}

// The device of a peer context argument.
CUresult peer_device(CUcontext peer, int* dev) {
  if (!peer || !core().contexts().valid(ctx_of(peer))) return CUDA_ERROR_INVALID_CONTEXT;
  if (ctx_of(peer)->destroyed.load()) return CUDA_ERROR_CONTEXT_IS_DESTROYED;
  *dev = ctx_of(peer)->device;
  return CUDA_SUCCESS;
}

}  // namespace

RGPU_CU CUresult cuCtxSetCacheConfig(CUfunc_cache config_) {
  if (config_ < CU_FUNC_CACHE_PREFER_NONE || config_ > CU_FUNC_CACHE_PREFER_EQUAL)
    return CUDA_ERROR_INVALID_VALUE;
  uint64_t v = static_cast<uint64_t>(config_);  // CUfunc_cache numbers are cudaFuncCache's
  return config(Op::SetCacheConfig, &v);
}

RGPU_CU CUresult cuCtxGetCacheConfig(CUfunc_cache* pconfig) {
  if (!pconfig) return CUDA_ERROR_INVALID_VALUE;
  uint64_t v = 0;
  CUresult r = config(Op::GetCacheConfig, &v);
  if (r == CUDA_SUCCESS) *pconfig = static_cast<CUfunc_cache>(v);
  return r;
}

RGPU_CU CUresult cuCtxSetSharedMemConfig(CUsharedconfig config_) {
  if (config_ < CU_SHARED_MEM_CONFIG_DEFAULT_BANK_SIZE ||
      config_ > CU_SHARED_MEM_CONFIG_EIGHT_BYTE_BANK_SIZE)
    return CUDA_ERROR_INVALID_VALUE;
  uint64_t v = static_cast<uint64_t>(config_);  // CUsharedconfig numbers are cudaSharedMemConfig's
  return config(Op::SetSharedMemConfig, &v);
}

RGPU_CU CUresult cuCtxGetSharedMemConfig(CUsharedconfig* pConfig) {
  if (!pConfig) return CUDA_ERROR_INVALID_VALUE;
  uint64_t v = 0;
  CUresult r = config(Op::GetSharedMemConfig, &v);
  if (r == CUDA_SUCCESS) *pConfig = static_cast<CUsharedconfig>(v);
  return r;
}

RGPU_CU CUresult cuCtxResetPersistingL2Cache() { return config(Op::ResetPersistingL2, nullptr); }
RGPU_CU CUresult cuProfilerStart() { return config(Op::ProfilerStart, nullptr); }
RGPU_CU CUresult cuProfilerStop() { return config(Op::ProfilerStop, nullptr); }

// ---- peer access --------------------------------------------------------------------------------

RGPU_CU CUresult cuCtxEnablePeerAccess(CUcontext peerContext, unsigned int Flags) {
  RGPU_INIT();
  int dev = 0, peer = 0;
  if (client::Error e = cuda_fe::current_device(&dev); e != err::Success) return to_driver(e);
  if (CUresult r = peer_device(peerContext, &peer); r != CUDA_SUCCESS) return r;
  if (Flags != 0) return CUDA_ERROR_INVALID_VALUE;
  if (peer == dev) return CUDA_ERROR_INVALID_DEVICE;
  return to_driver(core().enable_peer_access(peer));
}

RGPU_CU CUresult cuCtxDisablePeerAccess(CUcontext peerContext) {
  RGPU_INIT();
  int dev = 0, peer = 0;
  if (client::Error e = cuda_fe::current_device(&dev); e != err::Success) return to_driver(e);
  if (CUresult r = peer_device(peerContext, &peer); r != CUDA_SUCCESS) return r;
  return to_driver(core().disable_peer_access(peer));
}

// ---- atomics and RDMA -------------------------------------------------------------------------

RGPU_CU CUresult cuDeviceGetHostAtomicCapabilities(unsigned int* capabilities,
                                                   const CUatomicOperation* operations,
                                                   unsigned int count, CUdevice dev) {
  RGPU_INIT();
  static_assert(sizeof(CUatomicOperation) == sizeof(uint32_t));
  return to_driver(core().atomic_caps(dev, -1, reinterpret_cast<const uint32_t*>(operations), count,
                                      capabilities));
}

RGPU_CU CUresult cuDeviceGetP2PAtomicCapabilities(unsigned int* capabilities,
                                                  const CUatomicOperation* operations,
                                                  unsigned int count, CUdevice srcDevice,
                                                  CUdevice dstDevice) {
  RGPU_INIT();
  if (dstDevice < 0) return CUDA_ERROR_INVALID_DEVICE;
  return to_driver(core().atomic_caps(
      srcDevice, dstDevice, reinterpret_cast<const uint32_t*>(operations), count, capabilities));
}

RGPU_CU CUresult cuFlushGPUDirectRDMAWrites(CUflushGPUDirectRDMAWritesTarget target,
                                            CUflushGPUDirectRDMAWritesScope scope) {
  RGPU_INIT();
  int dev = 0;
  if (client::Error e = cuda_fe::current_device(&dev); e != err::Success) return to_driver(e);
  return to_driver(
      core().flush_rdma_writes(static_cast<uint32_t>(target), static_cast<uint32_t>(scope)));
}
