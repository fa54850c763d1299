// Virtual memory management through the driver API (client/vmm.cc, server/vmm.cc): address
// reservations in a device's window, physical allocations of pinned device memory, mappings and
// their access.  A CUmemGenericAllocationHandle is the client core's handle id.
#include <cstring>

#include "common/log.h"
#include "frontend/cuda/api.h"

using namespace rgpu;
using rgpu::cuda_fe::core;
using rgpu::cuda_fe::to_driver;

namespace {

// The device a reservation belongs to: the current context's, else device 0 (CUDA's reservations
// belong to no device; rgpu's lie in one device's address window).
int reservation_device() {
  int dev = 0;
  if (cuda_fe::current_device(&dev) != err::Success) dev = 0;
  return dev;
}

// What rgpu makes: pinned device memory, no export or an exported POSIX file descriptor.
CUresult check_prop(const CUmemAllocationProp* prop, const char* fn) {
  if (!prop || prop->type != CU_MEM_ALLOCATION_TYPE_PINNED) return CUDA_ERROR_INVALID_VALUE;
  if (prop->location.type != CU_MEM_LOCATION_TYPE_DEVICE) {
    if (core().first_time(std::string(fn) + "-location"))
      LOG_ERROR(
          "%s: only device memory (CU_MEM_LOCATION_TYPE_DEVICE) is supported, not location "
          "type %d",
          fn, static_cast<int>(prop->location.type));
    return prop->location.type >= CU_MEM_LOCATION_TYPE_HOST &&
                   prop->location.type <= CU_MEM_LOCATION_TYPE_HOST_NUMA_CURRENT
               ? CUDA_ERROR_NOT_SUPPORTED
               : CUDA_ERROR_INVALID_VALUE;
  }
  if (core().check_device(prop->location.id) != err::Success) return CUDA_ERROR_INVALID_DEVICE;
  const unsigned types = static_cast<unsigned>(prop->requestedHandleTypes);
  if (types & static_cast<unsigned>(CU_MEM_HANDLE_TYPE_FABRIC)) {
    // A fabric handle names memory across an NVLink/IMEX fabric of machines; the client's
    // processes reach the GPU only through rgpud, which is no member of such a fabric.
    if (core().first_time(std::string(fn) + "-fabric"))
      LOG_ERROR(
          "%s: CU_MEM_HANDLE_TYPE_FABRIC is not supported through rgpu (a fabric handle needs "
          "the GPU in this machine's IMEX domain); use CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR "
          "or cudaIpcGetMemHandle between processes of this machine",
          fn);
    return CUDA_ERROR_NOT_SUPPORTED;
  }
  if (types & ~static_cast<unsigned>(CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR)) {
    if (core().first_time(std::string(fn) + "-handle-type"))
      LOG_ERROR("%s: handle types 0x%x are not supported (none or POSIX file descriptors only)", fn,
                types);
    return CUDA_ERROR_NOT_SUPPORTED;
  }
  if (prop->allocFlags.usage != 0) {
    if (core().first_time(std::string(fn) + "-usage"))
      LOG_ERROR("%s: allocation usage 0x%x (tile pool, decompression) is not supported", fn,
                prop->allocFlags.usage);
    return CUDA_ERROR_NOT_SUPPORTED;
  }
  return CUDA_SUCCESS;
}

}  // namespace

RGPU_CU CUresult cuMemGetAllocationGranularity(size_t* granularity, const CUmemAllocationProp* prop,
                                               CUmemAllocationGranularity_flags option) {
  RGPU_INIT();
  if (!granularity || (option != CU_MEM_ALLOC_GRANULARITY_MINIMUM &&
                       option != CU_MEM_ALLOC_GRANULARITY_RECOMMENDED))
    return CUDA_ERROR_INVALID_VALUE;
  if (CUresult r = check_prop(prop, "cuMemGetAllocationGranularity"); r != CUDA_SUCCESS) return r;
  uint64_t g = 0;
  CUresult r = to_driver(core().vmm_granularity(
      prop->location.id, option == CU_MEM_ALLOC_GRANULARITY_RECOMMENDED, &g));
  if (r == CUDA_SUCCESS) *granularity = g;
  return r;
}

RGPU_CU CUresult cuMemAddressReserve(CUdeviceptr* ptr, size_t size, size_t alignment,
                                     CUdeviceptr addr, unsigned long long flags) {
  RGPU_INIT();
  (void)addr;  // a hint: rgpu places the range in the device's window
  if (!ptr || size == 0 || flags != 0) return CUDA_ERROR_INVALID_VALUE;
  uint64_t p = 0;
  CUresult r = to_driver(core().vmm_reserve(reservation_device(), size, alignment, &p));
  if (r == CUDA_SUCCESS) *ptr = p;
  return r;
}

RGPU_CU CUresult cuMemAddressFree(CUdeviceptr ptr, size_t size) {
  RGPU_INIT();
  return to_driver(core().vmm_address_free(ptr, size));
}

RGPU_CU CUresult cuMemCreate(CUmemGenericAllocationHandle* handle, size_t size,
                             const CUmemAllocationProp* prop, unsigned long long flags) {
  RGPU_INIT();
  if (!handle || size == 0 || flags != 0) return CUDA_ERROR_INVALID_VALUE;
  if (CUresult r = check_prop(prop, "cuMemCreate"); r != CUDA_SUCCESS) return r;
  uint64_t h = 0;
  CUresult r = to_driver(core().vmm_create(prop->location.id, size,
                                           static_cast<uint32_t>(prop->requestedHandleTypes), &h));
  if (r == CUDA_SUCCESS) *handle = h;
  return r;
}

RGPU_CU CUresult cuMemRelease(CUmemGenericAllocationHandle handle) {
  RGPU_INIT();
  return to_driver(core().vmm_release(handle));
}

RGPU_CU CUresult cuMemMap(CUdeviceptr ptr, size_t size, size_t offset,
                          CUmemGenericAllocationHandle handle, unsigned long long flags) {
  RGPU_INIT();
  if (flags != 0 || size == 0) return CUDA_ERROR_INVALID_VALUE;
  return to_driver(core().vmm_map(ptr, size, offset, handle));
}

RGPU_CU CUresult cuMemUnmap(CUdeviceptr ptr, size_t size) {
  RGPU_INIT();
  if (size == 0) return CUDA_ERROR_INVALID_VALUE;
  return to_driver(core().vmm_unmap(ptr, size));
}

RGPU_CU CUresult cuMemSetAccess(CUdeviceptr ptr, size_t size, const CUmemAccessDesc* desc,
                                size_t count) {
  RGPU_INIT();
  if (!desc || count == 0 || size == 0) return CUDA_ERROR_INVALID_VALUE;
  for (size_t i = 0; i < count; ++i) {
    if (desc[i].location.type != CU_MEM_LOCATION_TYPE_DEVICE) {
      if (core().first_time("cuMemSetAccess-location"))
        LOG_ERROR("cuMemSetAccess: only devices can be given access, not location type %d",
                  static_cast<int>(desc[i].location.type));
      return CUDA_ERROR_NOT_SUPPORTED;
    }
    if (core().check_device(desc[i].location.id) != err::Success) return CUDA_ERROR_INVALID_DEVICE;
    const unsigned f = desc[i].flags;
    if (f != CU_MEM_ACCESS_FLAGS_PROT_NONE && f != CU_MEM_ACCESS_FLAGS_PROT_READ &&
        f != CU_MEM_ACCESS_FLAGS_PROT_READWRITE)
      return CUDA_ERROR_INVALID_VALUE;
  }
  for (size_t i = 0; i < count; ++i)
    if (CUresult r = to_driver(core().vmm_set_access(ptr, size, desc[i].location.id,
                                                     static_cast<uint32_t>(desc[i].flags)));
        r != CUDA_SUCCESS)
      return r;
  return CUDA_SUCCESS;
}

RGPU_CU CUresult cuMemGetAccess(unsigned long long* flags, const CUmemLocation* location,
                                CUdeviceptr ptr) {
  RGPU_INIT();
  if (!flags || !location) return CUDA_ERROR_INVALID_VALUE;
  if (location->type != CU_MEM_LOCATION_TYPE_DEVICE) return CUDA_ERROR_INVALID_VALUE;
  if (core().check_device(location->id) != err::Success) return CUDA_ERROR_INVALID_DEVICE;
  uint32_t f = 0;
  CUresult r = to_driver(core().vmm_get_access(ptr, location->id, &f));
  if (r == CUDA_SUCCESS) *flags = f;
  return r;
}

RGPU_CU CUresult cuMemRetainAllocationHandle(CUmemGenericAllocationHandle* handle, void* addr) {
  RGPU_INIT();
  if (!handle) return CUDA_ERROR_INVALID_VALUE;
  uint64_t h = 0;
  CUresult r = to_driver(core().vmm_retain(cuda_fe::dptr(addr), &h));
  if (r == CUDA_SUCCESS) *handle = h;
  return r;
}

RGPU_CU CUresult cuMemGetAllocationPropertiesFromHandle(CUmemAllocationProp* prop,
                                                        CUmemGenericAllocationHandle handle) {
  RGPU_INIT();
  if (!prop) return CUDA_ERROR_INVALID_VALUE;
  client::Client::VmmProperties p;
  if (CUresult r = to_driver(core().vmm_properties(handle, &p)); r != CUDA_SUCCESS) return r;
  std::memset(prop, 0, sizeof *prop);
  prop->type = CU_MEM_ALLOCATION_TYPE_PINNED;
  prop->location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  prop->location.id = p.device;
  prop->requestedHandleTypes = static_cast<CUmemAllocationHandleType>(p.handle_types);
  return CUDA_SUCCESS;
}
