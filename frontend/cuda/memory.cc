// Device and page-locked host memory: allocation, freeing, registration, queries, and the
// stream-ordered allocator (the client core's pools).
#include "frontend/cuda/api.h"
#include "frontend/cuda/graph_nodes.h"

using namespace rgpu;
using rgpu::cuda_fe::core;
using rgpu::cuda_fe::dptr;
using rgpu::cuda_fe::ptr;
using rgpu::cuda_fe::to_driver;

namespace {

CUresult current(int* dev) {
  RGPU_INIT();
  return to_driver(cuda_fe::current_device(dev));
}

}  // namespace

RGPU_CU CUresult cuMemAlloc_v2(CUdeviceptr* dp, size_t bytesize) {
  int dev = 0;
  if (CUresult r = current(&dev); r != CUDA_SUCCESS) return r;
  if (!dp || bytesize == 0) return CUDA_ERROR_INVALID_VALUE;
  // Prohibited by a stream capture's mode (as cudaMalloc; NVIDIA's runtime relies on it)?
  if (CUresult r = cuda_fe::unsafe_call(); r != CUDA_SUCCESS) return r;
  void* p = nullptr;
  CUresult r = to_driver(core().malloc(dev, bytesize, &p));
  if (r == CUDA_SUCCESS) *dp = dptr(p);
  return r;
}

RGPU_CU CUresult cuMemAllocPitch_v2(CUdeviceptr* dp, size_t* pitch, size_t width, size_t height,
                                    unsigned int elementSize) {
  int dev = 0;
  if (CUresult r = current(&dev); r != CUDA_SUCCESS) return r;
  if (!dp || !pitch || !width || !height) return CUDA_ERROR_INVALID_VALUE;
  if (elementSize != 4 && elementSize != 8 && elementSize != 16) return CUDA_ERROR_INVALID_VALUE;
  void* p = nullptr;
  CUresult r = to_driver(core().malloc_pitch(dev, width, height, &p, pitch));
  if (r == CUDA_SUCCESS) *dp = dptr(p);
  return r;
}

RGPU_CU CUresult cuMemFree_v2(CUdeviceptr p) {
  RGPU_INIT();
  if (!p) return CUDA_SUCCESS;
  return to_driver(core().free(ptr(p)));
}

RGPU_CU CUresult cuMemGetInfo_v2(size_t* free, size_t* total) {
  int dev = 0;
  if (CUresult r = current(&dev); r != CUDA_SUCCESS) return r;
  if (!free || !total) return CUDA_ERROR_INVALID_VALUE;
  return to_driver(core().mem_get_info(dev, free, total));
}

RGPU_CU CUresult cuMemGetAddressRange_v2(CUdeviceptr* pbase, size_t* psize, CUdeviceptr p) {
  RGPU_INIT();
  client::PointerInfo pi = core().pointer_info(ptr(p));
  if (pi.type != client::MemoryType::Device) return CUDA_ERROR_NOT_FOUND;
  if (pbase) *pbase = pi.base;
  if (psize) *psize = pi.size;
  return CUDA_SUCCESS;
}

RGPU_CU CUresult cuMemHostAlloc(void** pp, size_t bytesize, unsigned int Flags) {
  int dev = 0;
  if (CUresult r = current(&dev); r != CUDA_SUCCESS) return r;
  constexpr unsigned kKnown =
      CU_MEMHOSTALLOC_PORTABLE | CU_MEMHOSTALLOC_DEVICEMAP | CU_MEMHOSTALLOC_WRITECOMBINED;
  if (!pp || (Flags & ~kKnown)) return CUDA_ERROR_INVALID_VALUE;
  return to_driver(core().host_alloc(pp, bytesize, Flags));
}

RGPU_CU CUresult cuMemAllocHost_v2(void** pp, size_t bytesize) {
  return cuMemHostAlloc(pp, bytesize, 0);
}

RGPU_CU CUresult cuMemFreeHost(void* p) {
  RGPU_INIT();
  return to_driver(core().host_free(p));
}

RGPU_CU CUresult cuMemHostRegister_v2(void* p, size_t bytesize, unsigned int Flags) {
  int dev = 0;
  if (CUresult r = current(&dev); r != CUDA_SUCCESS) return r;
  constexpr unsigned kKnown = CU_MEMHOSTREGISTER_PORTABLE | CU_MEMHOSTREGISTER_DEVICEMAP |
                              CU_MEMHOSTREGISTER_IOMEMORY | CU_MEMHOSTREGISTER_READ_ONLY;
  if (!p || !bytesize || (Flags & ~kKnown)) return CUDA_ERROR_INVALID_VALUE;
  return to_driver(core().host_register(p, bytesize, Flags));
}

#undef cuMemHostRegister
RGPU_CU CUresult cuMemHostRegister(void* p, size_t bytesize, unsigned int Flags) {
  return cuMemHostRegister_v2(p, bytesize, Flags);
}

RGPU_CU CUresult cuMemHostUnregister(void* p) {
  RGPU_INIT();
  client::Error e = core().host_unregister(p);
  return e == err::Success ? CUDA_SUCCESS : CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED;
}

RGPU_CU CUresult cuMemHostGetDevicePointer_v2(CUdeviceptr* pdptr, void* p, unsigned int Flags) {
  RGPU_INIT();
  if (!pdptr || Flags != 0) return CUDA_ERROR_INVALID_VALUE;
  void* d = nullptr;
  CUresult r = to_driver(core().host_device_pointer(p, &d));
  if (r == CUDA_SUCCESS) *pdptr = dptr(d);
  return r;
}

RGPU_CU CUresult cuMemHostGetFlags(unsigned int* pFlags, void* p) {
  RGPU_INIT();
  if (!pFlags) return CUDA_ERROR_INVALID_VALUE;
  return to_driver(core().host_flags(p, pFlags));
}

// ---- stream-ordered allocation ----------------------------------------------------------------

namespace {

using Pool = client::Client::MemPool;
Pool* pool_of(CUmemoryPool p) { return reinterpret_cast<Pool*>(p); }

CUresult alloc_async(CUdeviceptr* dp, size_t bytesize, Pool* pool, CUstream hStream, bool pt) {
  RGPU_INIT();
  if (!dp) return CUDA_ERROR_INVALID_VALUE;
  client::Stream s;
  if (client::Error e = cuda_fe::stream_of(hStream, pt, &s); e != err::Success) return to_driver(e);
  void* p = nullptr;
  CUresult r = to_driver(core().malloc_async(&p, bytesize, pool, s));
  if (r == CUDA_SUCCESS) *dp = dptr(p);
  return r;
}

CUresult free_async(CUdeviceptr dp, CUstream hStream, bool pt) {
  RGPU_INIT();
  client::Stream s;
  if (client::Error e = cuda_fe::stream_of(hStream, pt, &s); e != err::Success) return to_driver(e);
  return to_driver(core().free_async(ptr(dp), s));
}

}  // namespace

RGPU_CU CUresult cuMemAllocAsync(CUdeviceptr* dp, size_t bytesize, CUstream hStream) {
  return alloc_async(dp, bytesize, nullptr, hStream, false);
}
RGPU_CU CUresult cuMemAllocAsync_ptsz(CUdeviceptr* dp, size_t bytesize, CUstream hStream) {
  return alloc_async(dp, bytesize, nullptr, hStream, true);
}
RGPU_CU CUresult cuMemAllocFromPoolAsync(CUdeviceptr* dp, size_t bytesize, CUmemoryPool pool,
                                         CUstream hStream) {
  if (!pool) return CUDA_ERROR_INVALID_VALUE;
  return alloc_async(dp, bytesize, pool_of(pool), hStream, false);
}
RGPU_CU CUresult cuMemAllocFromPoolAsync_ptsz(CUdeviceptr* dp, size_t bytesize, CUmemoryPool pool,
                                              CUstream hStream) {
  if (!pool) return CUDA_ERROR_INVALID_VALUE;
  return alloc_async(dp, bytesize, pool_of(pool), hStream, true);
}
RGPU_CU CUresult cuMemFreeAsync(CUdeviceptr dp, CUstream hStream) {
  return free_async(dp, hStream, false);
}
RGPU_CU CUresult cuMemFreeAsync_ptsz(CUdeviceptr dp, CUstream hStream) {
  return free_async(dp, hStream, true);
}

RGPU_CU CUresult cuDeviceGetDefaultMemPool(CUmemoryPool* pool_out, CUdevice dev) {
  RGPU_INIT();
  if (!pool_out) return CUDA_ERROR_INVALID_VALUE;
  Pool* p = nullptr;
  CUresult r = to_driver(core().mem_pool_default(dev, &p));
  if (r == CUDA_SUCCESS) *pool_out = reinterpret_cast<CUmemoryPool>(p);
  return r;
}

RGPU_CU CUresult cuDeviceGetMemPool(CUmemoryPool* pool, CUdevice dev) {
  RGPU_INIT();
  if (!pool) return CUDA_ERROR_INVALID_VALUE;
  Pool* p = nullptr;
  CUresult r = to_driver(core().mem_pool_current(dev, &p));
  if (r == CUDA_SUCCESS) *pool = reinterpret_cast<CUmemoryPool>(p);
  return r;
}

RGPU_CU CUresult cuDeviceSetMemPool(CUdevice dev, CUmemoryPool pool) {
  RGPU_INIT();
  return to_driver(core().mem_pool_set_current(dev, pool_of(pool)));
}

RGPU_CU CUresult cuMemPoolCreate(CUmemoryPool* pool, const CUmemPoolProps* props) {
  RGPU_INIT();
  if (!pool || !props) return CUDA_ERROR_INVALID_VALUE;
  // Host and NUMA pools: not over a remote link (the runtime answers the same).
  if (props->allocType != CU_MEM_ALLOCATION_TYPE_PINNED ||
      props->location.type != CU_MEM_LOCATION_TYPE_DEVICE)
    return CUDA_ERROR_INVALID_VALUE;
  // Shareable as a POSIX file descriptor between processes of one server (client/misc2.cc);
  // Win32 and fabric handles are not.
  if (props->handleTypes & ~CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR)
    return static_cast<CUresult>(
        cuda_fe::unsupported("cuMemPoolCreate with Win32 or fabric handle types"));
  Pool* p = nullptr;
  CUresult r = to_driver(core().mem_pool_create(props->location.id, props->maxSize, &p));
  if (r == CUDA_SUCCESS) p->handle_types = static_cast<unsigned>(props->handleTypes);
  if (r == CUDA_SUCCESS) *pool = reinterpret_cast<CUmemoryPool>(p);
  return r;
}

// ---- pools shared between processes of one server (the runtime's forms: frontend/cudart/misc2.cc)

static_assert(sizeof(CUmemPoolPtrExportData) == client::Client::kIpcHandleBytes);

RGPU_CU CUresult cuMemPoolExportToShareableHandle(void* handle_out, CUmemoryPool pool,
                                                  CUmemAllocationHandleType handleType,
                                                  unsigned long long flags) {
  RGPU_INIT();
  if (!handle_out || !pool || flags) return CUDA_ERROR_INVALID_VALUE;
  int fd = -1;
  CUresult r =
      to_driver(core().mem_pool_export_fd(pool_of(pool), static_cast<unsigned>(handleType), &fd));
  if (r == CUDA_SUCCESS) *static_cast<int*>(handle_out) = fd;  // an int, as CUDA's
  return r;
}

RGPU_CU CUresult cuMemPoolImportFromShareableHandle(CUmemoryPool* pool_out, void* handle,
                                                    CUmemAllocationHandleType handleType,
                                                    unsigned long long flags) {
  RGPU_INIT();
  if (!pool_out || flags) return CUDA_ERROR_INVALID_VALUE;
  // A POSIX file descriptor arrives as the pointer's value, as with CUDA.
  const int fd = static_cast<int>(reinterpret_cast<intptr_t>(handle));
  Pool* p = nullptr;
  CUresult r = to_driver(core().mem_pool_import_fd(fd, static_cast<unsigned>(handleType), &p));
  if (r == CUDA_SUCCESS) *pool_out = reinterpret_cast<CUmemoryPool>(p);
  return r;
}

RGPU_CU CUresult cuMemPoolExportPointer(CUmemPoolPtrExportData* shareData_out, CUdeviceptr p) {
  RGPU_INIT();
  if (!shareData_out) return CUDA_ERROR_INVALID_VALUE;
  return to_driver(core().mem_pool_export_pointer(ptr(p), shareData_out->reserved));
}

RGPU_CU CUresult cuMemPoolImportPointer(CUdeviceptr* ptr_out, CUmemoryPool pool,
                                        CUmemPoolPtrExportData* shareData) {
  RGPU_INIT();
  if (!ptr_out || !pool || !shareData) return CUDA_ERROR_INVALID_VALUE;
  void* p = nullptr;
  CUresult r = to_driver(core().mem_pool_import_pointer(pool_of(pool), shareData->reserved, &p));
  if (r == CUDA_SUCCESS) *ptr_out = dptr(p);
  return r;
}

RGPU_CU CUresult cuMemPoolDestroy(CUmemoryPool pool) {
  RGPU_INIT();
  return to_driver(core().mem_pool_destroy(pool_of(pool)));
}

RGPU_CU CUresult cuMemPoolTrimTo(CUmemoryPool pool, size_t minBytesToKeep) {
  RGPU_INIT();
  return to_driver(core().mem_pool_trim(pool_of(pool), minBytesToKeep));
}

// CUmemPool_attribute numbers are cudaMemPoolAttr's; the 32-bit ones (reuse flags, 1-3) are ints.
RGPU_CU CUresult cuMemPoolSetAttribute(CUmemoryPool pool, CUmemPool_attribute attr, void* value) {
  RGPU_INIT();
  if (!value) return CUDA_ERROR_INVALID_VALUE;
  const bool is_int = attr <= CU_MEMPOOL_ATTR_REUSE_ALLOW_INTERNAL_DEPENDENCIES;
  uint64_t v =
      is_int ? static_cast<uint64_t>(*static_cast<int*>(value)) : *static_cast<cuuint64_t*>(value);
  return to_driver(core().mem_pool_set_attr(pool_of(pool), static_cast<uint32_t>(attr), v));
}

RGPU_CU CUresult cuMemPoolGetAttribute(CUmemoryPool pool, CUmemPool_attribute attr, void* value) {
  RGPU_INIT();
  if (!value) return CUDA_ERROR_INVALID_VALUE;
  uint64_t v = 0;
  CUresult r = to_driver(core().mem_pool_get_attr(pool_of(pool), static_cast<uint32_t>(attr), &v));
  if (r != CUDA_SUCCESS) return r;
  if (attr <= CU_MEMPOOL_ATTR_REUSE_ALLOW_INTERNAL_DEPENDENCIES)
    *static_cast<int*>(value) = static_cast<int>(v);
  else
    *static_cast<cuuint64_t*>(value) = v;
  return CUDA_SUCCESS;
}

namespace {

CUresult device_of(const CUmemLocation* loc, int* dev) {
  if (!loc || loc->type != CU_MEM_LOCATION_TYPE_DEVICE) return CUDA_ERROR_INVALID_VALUE;
  *dev = loc->id;
  return CUDA_SUCCESS;
}

}  // namespace

RGPU_CU CUresult cuMemPoolSetAccess(CUmemoryPool pool, const CUmemAccessDesc* map, size_t count) {
  RGPU_INIT();
  if (count && !map) return CUDA_ERROR_INVALID_VALUE;
  for (size_t i = 0; i < count; ++i) {
    int dev = 0;
    if (CUresult r = device_of(&map[i].location, &dev); r != CUDA_SUCCESS) return r;
    if (map[i].flags == CU_MEM_ACCESS_FLAGS_PROT_READ) return CUDA_ERROR_INVALID_VALUE;
    const bool rw = map[i].flags == CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
    if (CUresult r = to_driver(core().mem_pool_set_access(pool_of(pool), dev, rw));
        r != CUDA_SUCCESS)
      return r;
  }
  return CUDA_SUCCESS;
}

RGPU_CU CUresult cuMemPoolGetAccess(CUmemAccess_flags* flags, CUmemoryPool memPool,
                                    CUmemLocation* location) {
  RGPU_INIT();
  int dev = 0;
  if (!flags) return CUDA_ERROR_INVALID_VALUE;
  if (CUresult r = device_of(location, &dev); r != CUDA_SUCCESS) return r;
  bool rw = false;
  CUresult r = to_driver(core().mem_pool_get_access(pool_of(memPool), dev, &rw));
  if (r == CUDA_SUCCESS)
    *flags = rw ? CU_MEM_ACCESS_FLAGS_PROT_READWRITE : CU_MEM_ACCESS_FLAGS_PROT_NONE;
  return r;
}

// The location forms of CUDA 13: device locations and pinned allocations only.
RGPU_CU CUresult cuMemGetDefaultMemPool(CUmemoryPool* pool_out, CUmemLocation* location,
                                        CUmemAllocationType type) {
  RGPU_INIT();
  int dev = 0;
  if (type != CU_MEM_ALLOCATION_TYPE_PINNED) return CUDA_ERROR_INVALID_VALUE;
  if (CUresult r = device_of(location, &dev); r != CUDA_SUCCESS) return r;
  return cuDeviceGetDefaultMemPool(pool_out, dev);
}

RGPU_CU CUresult cuMemGetMemPool(CUmemoryPool* pool, CUmemLocation* location,
                                 CUmemAllocationType type) {
  RGPU_INIT();
  int dev = 0;
  if (type != CU_MEM_ALLOCATION_TYPE_PINNED) return CUDA_ERROR_INVALID_VALUE;
  if (CUresult r = device_of(location, &dev); r != CUDA_SUCCESS) return r;
  return cuDeviceGetMemPool(pool, dev);
}

RGPU_CU CUresult cuMemSetMemPool(CUmemLocation* location, CUmemAllocationType type,
                                 CUmemoryPool pool) {
  RGPU_INIT();
  int dev = 0;
  if (type != CU_MEM_ALLOCATION_TYPE_PINNED) return CUDA_ERROR_INVALID_VALUE;
  if (CUresult r = device_of(location, &dev); r != CUDA_SUCCESS) return r;
  return cuDeviceSetMemPool(dev, pool);
}
