// Device management: count, current device, properties, attributes, versions, sync and reset.
#include <cstring>

#include "frontend/cudart/api.h"

using namespace rgpu;
using rgpu::cudart::core;
using rgpu::cudart::ret;

namespace {

void fill_props(cudaDeviceProp* p, const client::DeviceInfo& d) {
  memset(p, 0, sizeof *p);
  auto a = [&](uint32_t id) { return d.attr(id); };
  auto az = [&](uint32_t id) { return static_cast<size_t>(static_cast<uint32_t>(d.attr(id))); };
  strncpy(p->name, d.name.c_str(), sizeof p->name - 1);
  memcpy(p->uuid.bytes, d.uuid, 16);
  p->totalGlobalMem = d.total_mem;
  p->sharedMemPerBlock = az(8);
  p->regsPerBlock = a(12);
  p->warpSize = a(10);
  p->memPitch = az(11);
  p->maxThreadsPerBlock = a(1);
  for (int i = 0; i < 3; ++i) p->maxThreadsDim[i] = a(2 + i);
  for (int i = 0; i < 3; ++i) p->maxGridSize[i] = a(5 + i);
  p->totalConstMem = az(9);
  p->major = a(75);
  p->minor = a(76);
  p->textureAlignment = az(14);
  p->texturePitchAlignment = az(51);
  p->multiProcessorCount = a(16);
  p->integrated = a(18);
  p->canMapHostMemory = a(19);
  p->maxTexture1D = a(21);
  p->maxTexture1DMipmap = a(77);
  p->maxTexture2D[0] = a(22), p->maxTexture2D[1] = a(23);
  p->maxTexture2DMipmap[0] = a(73), p->maxTexture2DMipmap[1] = a(74);
  for (int i = 0; i < 3; ++i) p->maxTexture2DLinear[i] = a(70 + i);
  p->maxTexture2DGather[0] = a(45), p->maxTexture2DGather[1] = a(46);
  for (int i = 0; i < 3; ++i) p->maxTexture3D[i] = a(24 + i);
  for (int i = 0; i < 3; ++i) p->maxTexture3DAlt[i] = a(47 + i);
  p->maxTextureCubemap = a(52);
  p->maxTexture1DLayered[0] = a(42), p->maxTexture1DLayered[1] = a(43);
  for (int i = 0; i < 3; ++i) p->maxTexture2DLayered[i] = a(27 + i);
  p->maxTextureCubemapLayered[0] = a(53), p->maxTextureCubemapLayered[1] = a(54);
  p->maxSurface1D = a(55);
  p->maxSurface2D[0] = a(56), p->maxSurface2D[1] = a(57);
  for (int i = 0; i < 3; ++i) p->maxSurface3D[i] = a(58 + i);
  p->maxSurface1DLayered[0] = a(61), p->maxSurface1DLayered[1] = a(62);
  for (int i = 0; i < 3; ++i) p->maxSurface2DLayered[i] = a(63 + i);
  p->maxSurfaceCubemap = a(66);
  p->maxSurfaceCubemapLayered[0] = a(67), p->maxSurfaceCubemapLayered[1] = a(68);
  p->surfaceAlignment = az(30);
  p->concurrentKernels = a(31);
  p->ECCEnabled = a(32);
  p->pciBusID = a(33);
  p->pciDeviceID = a(34);
  p->pciDomainID = a(50);
  p->tccDriver = a(35);
  p->asyncEngineCount = a(40);
  p->unifiedAddressing = a(41);
  p->memoryBusWidth = a(37);
  p->l2CacheSize = a(38);
  p->persistingL2CacheMaxSize = a(108);
  p->maxThreadsPerMultiProcessor = a(39);
  p->streamPrioritiesSupported = a(78);
  p->globalL1CacheSupported = a(79);
  p->localL1CacheSupported = a(80);
  p->sharedMemPerMultiprocessor = az(81);
  p->regsPerMultiprocessor = a(82);
  p->managedMemory = a(83);
  p->isMultiGpuBoard = a(84);
  p->multiGpuBoardGroupID = a(85);
  p->hostNativeAtomicSupported = a(86);
  p->pageableMemoryAccess = a(88);
  p->concurrentManagedAccess = a(89);
  p->computePreemptionSupported = a(90);
  p->canUseHostPointerForRegisteredMem = a(91);
  p->cooperativeLaunch = a(95);
  p->sharedMemPerBlockOptin = az(97);
  p->pageableMemoryAccessUsesHostPageTables = a(100);
  p->directManagedMemAccessFromHost = a(101);
  p->maxBlocksPerMultiProcessor = a(106);
  p->accessPolicyMaxWindowSize = a(109);
  p->reservedSharedMemPerBlock = az(111);
  p->hostRegisterSupported = a(99);
  p->sparseCudaArraySupported = a(112);
  p->hostRegisterReadOnlySupported = a(113);
  p->timelineSemaphoreInteropSupported = a(114);
  p->memoryPoolsSupported = a(115);
  p->gpuDirectRDMASupported = a(116);
  p->gpuDirectRDMAFlushWritesOptions = static_cast<unsigned>(a(117));
  p->gpuDirectRDMAWritesOrdering = a(118);
  p->memoryPoolSupportedHandleTypes = static_cast<unsigned>(a(119));
  p->deferredMappingCudaArraySupported = a(121);
  p->ipcEventSupported = a(125);
  p->clusterLaunch = a(120);
  p->unifiedFunctionPointers = a(129);
  p->deviceNumaConfig = a(130);
  p->deviceNumaId = a(131);
  p->mpsEnabled = a(133);
  p->hostNumaId = a(134);
  p->gpuPciDeviceID = static_cast<unsigned>(a(139));
  p->gpuPciSubsystemID = static_cast<unsigned>(a(140));
  p->hostNumaMultinodeIpcSupported = a(143);
}

}  // namespace

extern "C" {

cudaError_t cudaGetDeviceCount(int* count) {
  if (!count) return ret(err::InvalidValue);
  *count = core().device_count();
  return *count ? cudaSuccess : ret(err::NoDevice);
}

cudaError_t cudaSetDevice(int device) { return ret(core().set_current_device(device)); }

cudaError_t cudaGetDevice(int* device) {
  if (!device) return ret(err::InvalidValue);
  *device = core().current_device();
  return cudaSuccess;
}

cudaError_t cudaGetDeviceProperties(cudaDeviceProp* prop, int device) {
  if (!prop) return ret(err::InvalidValue);
  const client::DeviceInfo* info = nullptr;
  if (CudaError e = core().device_info(device, &info); e != err::Success) return ret(e);
  fill_props(prop, *info);
  return cudaSuccess;
}

// CUDA 12 programs call the _v2 name; CUDA 13 has only the plain one.  Same layout (CUDA 13's).
__attribute__((visibility("default"))) cudaError_t cudaGetDeviceProperties_v2(cudaDeviceProp* prop,
                                                                              int device) {
  return cudaGetDeviceProperties(prop, device);
}

cudaError_t cudaDeviceGetAttribute(int* value, cudaDeviceAttr attr, int device) {
  if (!value) return ret(err::InvalidValue);
  const client::DeviceInfo* info = nullptr;
  if (CudaError e = core().device_info(device, &info); e != err::Success) return ret(e);
  auto it = info->attrs.find(static_cast<uint32_t>(attr));
  if (it == info->attrs.end()) return ret(err::InvalidValue);
  *value = it->second;
  return cudaSuccess;
}

cudaError_t cudaDeviceSynchronize(void) { return ret(core().synchronize(core().current_device())); }

cudaError_t cudaDeviceReset(void) { return ret(core().reset(core().current_device())); }

cudaError_t cudaDriverGetVersion(int* version) {
  if (!version) return ret(err::InvalidValue);
  // Like CUDA without a driver: 0 and success when no server can be reached.
  if (core().driver_version(core().current_device(), version) != err::Success) *version = 0;
  return cudaSuccess;
}

cudaError_t cudaRuntimeGetVersion(int* version) {
  if (!version) return ret(err::InvalidValue);
  *version = CUDART_VERSION;
  return cudaSuccess;
}

}  // extern "C"
