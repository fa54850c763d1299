// Stream-ordered allocation (cudaMallocAsync, memory pools) and mapped page-locked memory
// (cudaHostGetDevicePointer, cudaHostGetFlags).  Pools live on the server (server/mem_pools.h).
#include "frontend/cudart/api.h"

using namespace rgpu;
using rgpu::cudart::core;
using rgpu::cudart::ret;
using rgpu::cudart::stream_arg;
using Pool = rgpu::client::Client::MemPool;

namespace {

Pool* pool_of(cudaMemPool_t p) { return reinterpret_cast<Pool*>(p); }
cudaMemPool_t handle_of(Pool* p) { return reinterpret_cast<cudaMemPool_t>(p); }

// A device location (the only kind rgpu's pools have).
CudaError device_of(const cudaMemLocation* loc, int* dev) {
  if (!loc || loc->type != cudaMemLocationTypeDevice) return err::InvalidValue;
  *dev = loc->id;
  return err::Success;
}

cudaError_t malloc_async(void** ptr, size_t size, Pool* pool, cudaStream_t stream, bool pt) {
  client::Stream s;
  if (CudaError e = stream_arg(stream, pt, &s); e != err::Success) return ret(e);
  return ret(core().malloc_async(ptr, size, pool, s));
}

cudaError_t free_async(void* ptr, cudaStream_t stream, bool pt) {
  client::Stream s;
  if (CudaError e = stream_arg(stream, pt, &s); e != err::Success) return ret(e);
  return ret(core().free_async(ptr, s));
}

bool is_size_attr(cudaMemPoolAttr a) { return a >= cudaMemPoolAttrReleaseThreshold; }

}  // namespace

// The _ptsz forms are not declared by the toolkit's headers here: exported explicitly.
#define RGPU_EXPORT __attribute__((visibility("default")))

extern "C" {

cudaError_t cudaMallocAsync(void** devPtr, size_t size, cudaStream_t hStream) {
  return malloc_async(devPtr, size, nullptr, hStream, false);
}
RGPU_EXPORT cudaError_t cudaMallocAsync_ptsz(void** devPtr, size_t size, cudaStream_t hStream) {
  return malloc_async(devPtr, size, nullptr, hStream, true);
}
cudaError_t cudaMallocFromPoolAsync(void** ptr, size_t size, cudaMemPool_t memPool,
                                    cudaStream_t stream) {
  if (!memPool) return ret(err::InvalidValue);
  return malloc_async(ptr, size, pool_of(memPool), stream, false);
}
RGPU_EXPORT cudaError_t cudaMallocFromPoolAsync_ptsz(void** ptr, size_t size, cudaMemPool_t memPool,
                                                     cudaStream_t stream) {
  if (!memPool) return ret(err::InvalidValue);
  return malloc_async(ptr, size, pool_of(memPool), stream, true);
}
cudaError_t cudaFreeAsync(void* devPtr, cudaStream_t hStream) {
  return free_async(devPtr, hStream, false);
}
RGPU_EXPORT cudaError_t cudaFreeAsync_ptsz(void* devPtr, cudaStream_t hStream) {
  return free_async(devPtr, hStream, true);
}

cudaError_t cudaDeviceGetDefaultMemPool(cudaMemPool_t* memPool, int device) {
  if (!memPool) return ret(err::InvalidValue);
  Pool* p = nullptr;
  CudaError e = core().mem_pool_default(device, &p);
  if (e == err::Success) *memPool = handle_of(p);
  return ret(e);
}

cudaError_t cudaDeviceGetMemPool(cudaMemPool_t* memPool, int device) {
  if (!memPool) return ret(err::InvalidValue);
  Pool* p = nullptr;
  CudaError e = core().mem_pool_current(device, &p);
  if (e == err::Success) *memPool = handle_of(p);
  return ret(e);
}

cudaError_t cudaDeviceSetMemPool(int device, cudaMemPool_t memPool) {
  return ret(core().mem_pool_set_current(device, pool_of(memPool)));
}

// The location forms: device pools only (host and NUMA pools are not offered remotely).
cudaError_t cudaMemGetDefaultMemPool(cudaMemPool_t* memPool, cudaMemLocation* location,
                                     cudaMemAllocationType type) {
  int dev = 0;
  if (type != cudaMemAllocationTypePinned) return ret(err::InvalidValue);
  if (CudaError e = device_of(location, &dev); e != err::Success) return ret(e);
  return cudaDeviceGetDefaultMemPool(memPool, dev);
}

cudaError_t cudaMemGetMemPool(cudaMemPool_t* memPool, cudaMemLocation* location,
                              cudaMemAllocationType type) {
  int dev = 0;
  if (type != cudaMemAllocationTypePinned) return ret(err::InvalidValue);
  if (CudaError e = device_of(location, &dev); e != err::Success) return ret(e);
  return cudaDeviceGetMemPool(memPool, dev);
}

cudaError_t cudaMemSetMemPool(cudaMemLocation* location, cudaMemAllocationType type,
                              cudaMemPool_t memPool) {
  int dev = 0;
  if (type != cudaMemAllocationTypePinned) return ret(err::InvalidValue);
  if (CudaError e = device_of(location, &dev); e != err::Success) return ret(e);
  return cudaDeviceSetMemPool(dev, memPool);
}

cudaError_t cudaMemPoolCreate(cudaMemPool_t* memPool, const cudaMemPoolProps* poolProps) {
  if (!memPool || !poolProps) return ret(err::InvalidValue);
  if (poolProps->allocType != cudaMemAllocationTypePinned ||
      poolProps->location.type != cudaMemLocationTypeDevice)
    return ret(err::InvalidValue);  // host and NUMA pools: not over a remote link
  // Shareable as a POSIX file descriptor between processes of one server (client/misc2.cc);
  // Win32 and fabric handles are not.
  if (poolProps->handleTypes & ~cudaMemHandleTypePosixFileDescriptor) {
    rgpu::cudart::unsupported("cudaMemPoolCreate with Win32 or fabric handle types");
    return ret(err::NotSupported);
  }
  Pool* p = nullptr;
  CudaError e = core().mem_pool_create(poolProps->location.id, poolProps->maxSize, &p);
  if (e == err::Success) p->handle_types = static_cast<unsigned>(poolProps->handleTypes);
  if (e == err::Success) *memPool = handle_of(p);
  return ret(e);
}

cudaError_t cudaMemPoolDestroy(cudaMemPool_t memPool) {
  return ret(core().mem_pool_destroy(pool_of(memPool)));
}

cudaError_t cudaMemPoolSetAttribute(cudaMemPool_t memPool, cudaMemPoolAttr attr, void* value) {
  if (!value) return ret(err::InvalidValue);
  uint64_t v = is_size_attr(attr) ? *static_cast<uint64_t*>(value)
                                  : static_cast<uint64_t>(*static_cast<int*>(value));
  return ret(core().mem_pool_set_attr(pool_of(memPool), static_cast<uint32_t>(attr), v));
}

cudaError_t cudaMemPoolGetAttribute(cudaMemPool_t memPool, cudaMemPoolAttr attr, void* value) {
  if (!value) return ret(err::InvalidValue);
  uint64_t v = 0;
  CudaError e = core().mem_pool_get_attr(pool_of(memPool), static_cast<uint32_t>(attr), &v);
  if (e != err::Success) return ret(e);
  if (is_size_attr(attr))
    *static_cast<uint64_t*>(value) = v;
  else
    *static_cast<int*>(value) = static_cast<int>(v);
  return cudaSuccess;
}

cudaError_t cudaMemPoolTrimTo(cudaMemPool_t memPool, size_t minBytesToKeep) {
  return ret(core().mem_pool_trim(pool_of(memPool), minBytesToKeep));
}

cudaError_t cudaMemPoolSetAccess(cudaMemPool_t memPool, const cudaMemAccessDesc* descList,
                                 size_t count) {
  if (count && !descList) return ret(err::InvalidValue);
  for (size_t i = 0; i < count; ++i) {
    int dev = 0;
    if (CudaError e = device_of(&descList[i].location, &dev); e != err::Success) return ret(e);
    if (descList[i].flags == cudaMemAccessFlagsProtRead) return ret(err::InvalidValue);
    bool rw = descList[i].flags == cudaMemAccessFlagsProtReadWrite;
    if (CudaError e = core().mem_pool_set_access(pool_of(memPool), dev, rw); e != err::Success)
      return ret(e);
  }
  return cudaSuccess;
}

cudaError_t cudaMemPoolGetAccess(cudaMemAccessFlags* flags, cudaMemPool_t memPool,
                                 cudaMemLocation* location) {
  int dev = 0;
  if (!flags) return ret(err::InvalidValue);
  if (CudaError e = device_of(location, &dev); e != err::Success) return ret(e);
  bool rw = false;
  CudaError e = core().mem_pool_get_access(pool_of(memPool), dev, &rw);
  if (e == err::Success) *flags = rw ? cudaMemAccessFlagsProtReadWrite : cudaMemAccessFlagsProtNone;
  return ret(e);
}

cudaError_t cudaHostGetDevicePointer(void** pDevice, void* pHost, unsigned int flags) {
  if (flags != 0) return ret(err::InvalidValue);
  return ret(core().host_device_pointer(pHost, pDevice));
}

cudaError_t cudaHostGetFlags(unsigned int* pFlags, void* pHost) {
  return ret(core().host_flags(pHost, pFlags));
}

}  // extern "C"
