// The CUDA driver API, loaded at run time (dlopen libcuda.so.1) so that rgpud builds and starts on
// machines without a driver.  Only the entry points rgpu uses.
#pragma once

#include <cuda.h>

#include <string>

namespace rgpu::backend {

struct CudaDriver {
#define RGPU_CU_FUNCS(X)                                                                       \
  X(cuInit, CUresult (*)(unsigned))                                                            \
  X(cuDriverGetVersion, CUresult (*)(int*))                                                    \
  X(cuGetErrorName, CUresult (*)(CUresult, const char**))                                      \
  X(cuGetErrorString, CUresult (*)(CUresult, const char**))                                    \
  X(cuDeviceGetCount, CUresult (*)(int*))                                                      \
  X(cuDeviceGet, CUresult (*)(CUdevice*, int))                                                 \
  X(cuDeviceGetName, CUresult (*)(char*, int, CUdevice))                                       \
  X(cuDeviceGetUuid_v2, CUresult (*)(CUuuid*, CUdevice))                                       \
  X(cuDeviceTotalMem_v2, CUresult (*)(size_t*, CUdevice))                                      \
  X(cuDeviceGetAttribute, CUresult (*)(int*, CUdevice_attribute, CUdevice))                    \
  X(cuDevicePrimaryCtxRetain, CUresult (*)(CUcontext*, CUdevice))                              \
  X(cuDevicePrimaryCtxRelease_v2, CUresult (*)(CUdevice))                                      \
  X(cuDevicePrimaryCtxReset_v2, CUresult (*)(CUdevice))                                        \
  X(cuCtxSetCurrent, CUresult (*)(CUcontext))                                                  \
  X(cuCtxSynchronize, CUresult (*)(void))                                                      \
  X(cuMemAddressReserve, CUresult (*)(CUdeviceptr*, size_t, size_t, CUdeviceptr,              \
                                      unsigned long long))                                     \
  X(cuMemAddressFree, CUresult (*)(CUdeviceptr, size_t))                                       \
  X(cuMemCreate, CUresult (*)(CUmemGenericAllocationHandle*, size_t,                           \
                              const CUmemAllocationProp*, unsigned long long))                 \
  X(cuMemRelease, CUresult (*)(CUmemGenericAllocationHandle))                                  \
  X(cuMemMap, CUresult (*)(CUdeviceptr, size_t, size_t, CUmemGenericAllocationHandle,          \
                           unsigned long long))                                                \
  X(cuMemUnmap, CUresult (*)(CUdeviceptr, size_t))                                             \
  X(cuMemSetAccess, CUresult (*)(CUdeviceptr, size_t, const CUmemAccessDesc*, size_t))         \
  X(cuMemGetAllocationGranularity, CUresult (*)(size_t*, const CUmemAllocationProp*,           \
                                                CUmemAllocationGranularity_flags))             \
  X(cuMemGetInfo_v2, CUresult (*)(size_t*, size_t*))                                           \
  X(cuMemHostAlloc, CUresult (*)(void**, size_t, unsigned))                                    \
  X(cuMemFreeHost, CUresult (*)(void*))                                                        \
  X(cuMemcpyHtoD_v2, CUresult (*)(CUdeviceptr, const void*, size_t))                           \
  X(cuMemcpyDtoH_v2, CUresult (*)(void*, CUdeviceptr, size_t))                                 \
  X(cuMemcpyDtoD_v2, CUresult (*)(CUdeviceptr, CUdeviceptr, size_t))                           \
  X(cuMemcpy2D_v2, CUresult (*)(const CUDA_MEMCPY2D*))                                         \
  X(cuMemsetD8_v2, CUresult (*)(CUdeviceptr, unsigned char, size_t))                           \
  X(cuLibraryLoadData, CUresult (*)(CUlibrary*, const void*, CUjit_option*, void**, unsigned,  \
                                    CUlibraryOption*, void**, unsigned))                       \
  X(cuLibraryUnload, CUresult (*)(CUlibrary))                                                  \
  X(cuLibraryGetKernel, CUresult (*)(CUkernel*, CUlibrary, const char*))                       \
  X(cuLibraryGetGlobal, CUresult (*)(CUdeviceptr*, size_t*, CUlibrary, const char*))           \
  X(cuKernelGetParamInfo, CUresult (*)(CUkernel, size_t, size_t*, size_t*))                    \
  X(cuKernelGetAttribute, CUresult (*)(int*, CUfunction_attribute, CUkernel, CUdevice))        \
  X(cuKernelSetAttribute, CUresult (*)(CUfunction_attribute, int, CUkernel, CUdevice))         \
  X(cuKernelSetCacheConfig, CUresult (*)(CUkernel, CUfunc_cache, CUdevice))                    \
  X(cuKernelGetFunction, CUresult (*)(CUfunction*, CUkernel))                                  \
  X(cuLaunchKernel, CUresult (*)(CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned, \
                                 unsigned, unsigned, CUstream, void**, void**))                \
  X(cuOccupancyMaxActiveBlocksPerMultiprocessorWithFlags,                                      \
    CUresult (*)(int*, CUfunction, int, size_t, unsigned))                                     \
  X(cuStreamCreateWithPriority, CUresult (*)(CUstream*, unsigned, int))                        \
  X(cuStreamDestroy_v2, CUresult (*)(CUstream))                                                \
  X(cuStreamSynchronize, CUresult (*)(CUstream))                                               \
  X(cuStreamQuery, CUresult (*)(CUstream))                                                     \
  X(cuStreamWaitEvent, CUresult (*)(CUstream, CUevent, unsigned))                              \
  X(cuCtxGetStreamPriorityRange, CUresult (*)(int*, int*))                                     \
  X(cuEventCreate, CUresult (*)(CUevent*, unsigned))                                           \
  X(cuEventDestroy_v2, CUresult (*)(CUevent))                                                  \
  X(cuEventRecord, CUresult (*)(CUevent, CUstream))                                            \
  X(cuEventQuery, CUresult (*)(CUevent))                                                       \
  X(cuEventSynchronize, CUresult (*)(CUevent))                                                 \
  X(cuEventElapsedTime_v2, CUresult (*)(float*, CUevent, CUevent))                             \
  X(cuLaunchHostFunc, CUresult (*)(CUstream, CUhostFn, void*))                                 \
  X(cuStreamBeginCapture_v2, CUresult (*)(CUstream, CUstreamCaptureMode))                      \
  X(cuStreamEndCapture, CUresult (*)(CUstream, CUgraph*))                                      \
  X(cuGraphInstantiateWithFlags, CUresult (*)(CUgraphExec*, CUgraph, unsigned long long))      \
  X(cuGraphLaunch, CUresult (*)(CUgraphExec, CUstream))                                        \
  X(cuGraphExecDestroy, CUresult (*)(CUgraphExec))                                             \
  X(cuGraphDestroy, CUresult (*)(CUgraph))                                                     \
  X(cuGraphCreate, CUresult (*)(CUgraph*, unsigned))                                           \
  X(cuGraphGetNodes, CUresult (*)(CUgraph, CUgraphNode*, size_t*))                             \
  X(cuGraphDestroyNode, CUresult (*)(CUgraphNode))                                             \
  X(cuGraphConditionalHandleCreate,                                                            \
    CUresult (*)(CUgraphConditionalHandle*, CUgraph, CUcontext, unsigned, unsigned))           \
  X(cuStreamBeginCaptureToGraph,                                                               \
    CUresult (*)(CUstream, CUgraph, const CUgraphNode*, const CUgraphEdgeData*, size_t,        \
                 CUstreamCaptureMode))                                                         \
  X(cuStreamGetCaptureInfo_v3,                                                                 \
    CUresult (*)(CUstream, CUstreamCaptureStatus*, cuuint64_t*, CUgraph*,                      \
                 const CUgraphNode**, const CUgraphEdgeData**, size_t*))                       \
  X(cuStreamUpdateCaptureDependencies_v2,                                                      \
    CUresult (*)(CUstream, CUgraphNode*, const CUgraphEdgeData*, size_t, unsigned))            \
  X(cuGraphAddNode_v2,                                                                         \
    CUresult (*)(CUgraphNode*, CUgraph, const CUgraphNode*, const CUgraphEdgeData*, size_t,    \
                 CUgraphNodeParams*))                                                          \
  X(cuStreamWaitValue32_v2, CUresult (*)(CUstream, CUdeviceptr, cuuint32_t, unsigned))         \
  X(cuMemHostGetDevicePointer_v2, CUresult (*)(CUdeviceptr*, void*, unsigned))                 \
  X(cuMemcpyHtoDAsync_v2, CUresult (*)(CUdeviceptr, const void*, size_t, CUstream))            \
  X(cuMemcpyDtoHAsync_v2, CUresult (*)(void*, CUdeviceptr, size_t, CUstream))                  \
  X(cuMemcpyDtoDAsync_v2, CUresult (*)(CUdeviceptr, CUdeviceptr, size_t, CUstream))            \
  X(cuMemcpy2DAsync_v2, CUresult (*)(const CUDA_MEMCPY2D*, CUstream))                          \
  X(cuMemsetD8Async, CUresult (*)(CUdeviceptr, unsigned char, size_t, CUstream))               \
  X(cuMemcpyPeerAsync,                                                                         \
    CUresult (*)(CUdeviceptr, CUcontext, CUdeviceptr, CUcontext, size_t, CUstream))            \
  X(cuDeviceCanAccessPeer, CUresult (*)(int*, CUdevice, CUdevice))                             \
  X(cuCtxEnablePeerAccess, CUresult (*)(CUcontext, unsigned))                          \
  X(cuMemHostRegister_v2, CUresult (*)(void*, size_t, unsigned))                       \
  X(cuMemHostUnregister, CUresult (*)(void*))                                          \
  /* ---- devmem */                                                                    \
  X(cuCtxSetLimit, CUresult (*)(CUlimit, size_t))                                      \
  X(cuCtxGetLimit, CUresult (*)(size_t*, CUlimit))                                     \
  X(cuCtxSetCacheConfig, CUresult (*)(CUfunc_cache))                                   \
  X(cuCtxGetCacheConfig, CUresult (*)(CUfunc_cache*))                                  \
  X(cuCtxSetSharedMemConfig, CUresult (*)(CUsharedconfig))                             \
  X(cuCtxGetSharedMemConfig, CUresult (*)(CUsharedconfig*))                            \
  X(cuCtxResetPersistingL2Cache, CUresult (*)(void))                                   \
  X(cuProfilerStart, CUresult (*)(void))                                               \
  X(cuProfilerStop, CUresult (*)(void))                                                \
  X(cuDeviceGetP2PAttribute, CUresult (*)(int*, CUdevice_P2PAttribute, CUdevice, CUdevice)) \
  /* ---- launch */                                                                            \
  X(cuLaunchKernelEx, CUresult (*)(const CUlaunchConfig*, CUfunction, void**, void**))         \
  X(cuOccupancyMaxActiveClusters, CUresult (*)(int*, CUfunction, const CUlaunchConfig*))       \
  X(cuOccupancyMaxPotentialClusterSize, CUresult (*)(int*, CUfunction, const CUlaunchConfig*)) \
  X(cuOccupancyAvailableDynamicSMemPerBlock, CUresult (*)(size_t*, CUfunction, int, int))   \
  /* ---- ipc */                                                                               \
  X(cuMemGetAddressRange_v2, CUresult (*)(CUdeviceptr*, size_t*, CUdeviceptr))                 \
  X(cuMemRetainAllocationHandle, CUresult (*)(CUmemGenericAllocationHandle*, void*))           \
  X(cuMemExportToShareableHandle, CUresult (*)(void*, CUmemGenericAllocationHandle,            \
                                               CUmemAllocationHandleType, unsigned long long)) \
  X(cuMemImportFromShareableHandle,                                                            \
    CUresult (*)(CUmemGenericAllocationHandle*, void*, CUmemAllocationHandleType))          \
  /* ---- arrays */                                                                            \
  X(cuArray3DCreate_v2, CUresult (*)(CUarray*, const CUDA_ARRAY3D_DESCRIPTOR*))                 \
  X(cuArrayDestroy, CUresult (*)(CUarray))                                                     \
  X(cuMipmappedArrayCreate,                                                                    \
    CUresult (*)(CUmipmappedArray*, const CUDA_ARRAY3D_DESCRIPTOR*, unsigned))                 \
  X(cuMipmappedArrayGetLevel, CUresult (*)(CUarray*, CUmipmappedArray, unsigned))              \
  X(cuMipmappedArrayDestroy, CUresult (*)(CUmipmappedArray))                                   \
  X(cuMemcpy3DAsync_v2, CUresult (*)(const CUDA_MEMCPY3D*, CUstream))                          \
  X(cuArrayGetMemoryRequirements,                                                              \
    CUresult (*)(CUDA_ARRAY_MEMORY_REQUIREMENTS*, CUarray, CUdevice))                          \
  X(cuMipmappedArrayGetMemoryRequirements,                                                     \
    CUresult (*)(CUDA_ARRAY_MEMORY_REQUIREMENTS*, CUmipmappedArray, CUdevice))                 \
  X(cuArrayGetSparseProperties, CUresult (*)(CUDA_ARRAY_SPARSE_PROPERTIES*, CUarray))          \
  X(cuDeviceGetTexture1DLinearMaxWidth, CUresult (*)(size_t*, CUarray_format, unsigned, CUdevice)) \
  X(cuMipmappedArrayGetSparseProperties,                                                       \
    CUresult (*)(CUDA_ARRAY_SPARSE_PROPERTIES*, CUmipmappedArray))                             \
  X(cuTexObjectCreate, CUresult (*)(CUtexObject*, const CUDA_RESOURCE_DESC*,                   \
                                    const CUDA_TEXTURE_DESC*, const CUDA_RESOURCE_VIEW_DESC*)) \
  X(cuTexObjectDestroy, CUresult (*)(CUtexObject))                                             \
  X(cuSurfObjectCreate, CUresult (*)(CUsurfObject*, const CUDA_RESOURCE_DESC*))                \
  X(cuSurfObjectDestroy, CUresult (*)(CUsurfObject)) \
  /* ---- graphs3 */                                                                           \
  X(cuStreamSetAttribute, CUresult (*)(CUstream, CUstreamAttrID, const CUstreamAttrValue*))    \
  X(cuStreamGetAttribute, CUresult (*)(CUstream, CUstreamAttrID, CUstreamAttrValue*)) \
  /* ---- misc */                                                                              \
  X(cuCtxDisablePeerAccess, CUresult (*)(CUcontext))                                           \
  X(cuFlushGPUDirectRDMAWrites,                                                                \
    CUresult (*)(CUflushGPUDirectRDMAWritesTarget, CUflushGPUDirectRDMAWritesScope))           \
  X(cuIpcGetEventHandle, CUresult (*)(CUipcEventHandle*, CUevent))                             \
  X(cuIpcOpenEventHandle, CUresult (*)(CUevent*, CUipcEventHandle))

#define RGPU_DECLARE(name, type) \
  using name##_fn = type;        \
  name##_fn name = nullptr;
  RGPU_CU_FUNCS(RGPU_DECLARE)
#undef RGPU_DECLARE

  // Loads NVIDIA's libcuda.so.1 and every entry point, then cuInit.  False with `error` explaining
  // why (no driver, an old driver, no GPU).  rgpu's own client libcuda.so.1 is never used: one
  // found by the search (rgpu's lib directory on LD_LIBRARY_PATH) is passed over for the system
  // driver's usual places, and named in the error when there is no other.
  bool load(std::string& error);
  void* handle = nullptr;  // the loaded library (dlsym of entry points beyond the list above)
  std::string describe(CUresult r) const;
};

}  // namespace rgpu::backend
