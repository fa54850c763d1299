// cuGetProcAddress (both versions), cuGetExportTable, and pointer attributes.
#include "frontend/cuda/proc_address.h"

#include <cstring>

#include "frontend/cuda/api.h"
#include "frontend/cuda/export_tables.h"

using namespace rgpu;
using rgpu::cuda_fe::core;

namespace {

CUresult get_proc(const char* symbol, void** pfn, int version, cuuint64_t flags,
                  CUdriverProcAddressQueryResult* status) {
  if (!symbol || !pfn) return CUDA_ERROR_INVALID_VALUE;
  if (flags & ~static_cast<cuuint64_t>(CU_GET_PROC_ADDRESS_LEGACY_STREAM |
                                       CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM))
    return CUDA_ERROR_INVALID_VALUE;
  if (version > cuda_fe::kDriverApiVersion) {
    *pfn = nullptr;
    return CUDA_ERROR_INVALID_VALUE;
  }
  cuda_fe::ProcStatus st;
  *pfn = cuda_fe::find_proc(symbol, version, flags & CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM,
                            &st);
  if (status) *status = static_cast<CUdriverProcAddressQueryResult>(st);
  // An unknown name (or a version older than its first) is success with a null pointer.
  return CUDA_SUCCESS;
}

}  // namespace

RGPU_CU CUresult cuGetProcAddress_v2(const char* symbol, void** pfn, int cudaVersion,
                                     cuuint64_t flags, CUdriverProcAddressQueryResult* status) {
  return get_proc(symbol, pfn, cudaVersion, flags, status);
}

#undef cuGetProcAddress
RGPU_CU CUresult cuGetProcAddress(const char* symbol, void** pfn, int cudaVersion,
                                  cuuint64_t flags) {
  return get_proc(symbol, pfn, cudaVersion, flags, nullptr);
}

RGPU_CU CUresult cuGetExportTable(const void** ppExportTable, const CUuuid* pExportTableId) {
  if (!ppExportTable || !pExportTableId) return CUDA_ERROR_INVALID_VALUE;
  const void* t =
      cuda_fe::find_export_table(reinterpret_cast<const unsigned char*>(pExportTableId->bytes));
  *ppExportTable = t;
  return t ? CUDA_SUCCESS : CUDA_ERROR_NOT_FOUND;
}

// ---- pointer attributes -----------------------------------------------------------------------

namespace {

CUresult attribute(void* data, CUpointer_attribute attr, CUdeviceptr p) {
  const client::PointerInfo pi = core().pointer_info(cuda_fe::ptr(p));
  // Managed memory is device memory with one address on both sides (as NVIDIA's driver
  // answers: memory type device, both pointers, IS_MANAGED).
  const bool managed = pi.type == client::MemoryType::Managed;
  const bool device = pi.type == client::MemoryType::Device || managed;
  const bool host = pi.type == client::MemoryType::Host;
  switch (attr) {
    case CU_POINTER_ATTRIBUTE_CONTEXT: {
      if (!device && !host) return CUDA_ERROR_INVALID_VALUE;
      *static_cast<CUcontext*>(data) = cuda_fe::cu(core().contexts().primary(pi.device));
      return CUDA_SUCCESS;
    }
    case CU_POINTER_ATTRIBUTE_MEMORY_TYPE:
      if (!device && !host) return CUDA_ERROR_INVALID_VALUE;
      *static_cast<unsigned*>(data) = device ? CU_MEMORYTYPE_DEVICE : CU_MEMORYTYPE_HOST;
      return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_DEVICE_POINTER:
      if (!device && !(host && pi.mapped)) return CUDA_ERROR_INVALID_VALUE;
      *static_cast<CUdeviceptr*>(data) = p;
      return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_HOST_POINTER:
      if (!host && !managed) return CUDA_ERROR_INVALID_VALUE;
      *static_cast<void**>(data) = cuda_fe::ptr(p);
      return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_IS_MANAGED:
      if (!device && !host) return CUDA_ERROR_INVALID_VALUE;
      *static_cast<unsigned*>(data) = managed ? 1 : 0;
      return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL:
      if (!device && !host) return CUDA_ERROR_INVALID_VALUE;
      *static_cast<int*>(data) = pi.device;
      return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_RANGE_START_ADDR:
      if (!device && !host) return CUDA_ERROR_INVALID_VALUE;
      *static_cast<CUdeviceptr*>(data) = pi.base;
      return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_RANGE_SIZE:
      if (!device && !host) return CUDA_ERROR_INVALID_VALUE;
      *static_cast<size_t*>(data) = pi.size;
      return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_MAPPED:
      *static_cast<int*>(data) = device || host ? 1 : 0;
      return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_IS_LEGACY_CUDA_IPC_CAPABLE:
      *static_cast<int*>(data) = device && !managed ? 1 : 0;
      return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_BUFFER_ID:  // libraries (cuFFT) key their caches on it
    case CU_POINTER_ATTRIBUTE_MEMORY_BLOCK_ID:
      if (!device && !host) return CUDA_ERROR_INVALID_VALUE;
      *static_cast<unsigned long long*>(data) = pi.id;
      return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_IS_GPU_DIRECT_RDMA_CAPABLE:  // not for a client's remote memory
      if (!device && !host) return CUDA_ERROR_INVALID_VALUE;
      *static_cast<int*>(data) = 0;
      return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_ACCESS_FLAGS:
      if (!device && !host) return CUDA_ERROR_INVALID_VALUE;
      *static_cast<unsigned*>(data) = CU_POINTER_ATTRIBUTE_ACCESS_FLAG_READWRITE;
      return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_ALLOWED_HANDLE_TYPES: {  // 64 bits (NCCL reads it so)
      if (!device && !host) return CUDA_ERROR_INVALID_VALUE;
      // What cuMemExportToShareableHandle takes: a virtual-memory allocation's requested types;
      // none for other memory.
      unsigned long long types = 0;
      uint64_t h = 0;
      if (device && core().vmm_retain(p, &h) == err::Success) {
        client::Client::VmmProperties props;
        if (core().vmm_properties(h, &props) == err::Success) types = props.handle_types;
        core().vmm_release(h);
      }
      *static_cast<unsigned long long*>(data) = types;
      return CUDA_SUCCESS;
    }
    case CU_POINTER_ATTRIBUTE_MAPPING_BASE_ADDR:
      if (!device && !host) return CUDA_ERROR_INVALID_VALUE;
      *static_cast<CUdeviceptr*>(data) = pi.base;
      return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_MAPPING_SIZE:
      if (!device && !host) return CUDA_ERROR_INVALID_VALUE;
      *static_cast<size_t*>(data) = pi.size;
      return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_IS_HW_DECOMPRESS_CAPABLE:  // rgpu allocates no such memory
      if (!device && !host) return CUDA_ERROR_INVALID_VALUE;
      *static_cast<int*>(data) = 0;
      return CUDA_SUCCESS;
    default:
      return CUDA_ERROR_INVALID_VALUE;
  }
}

}  // namespace

RGPU_CU CUresult cuPointerGetAttribute(void* data, CUpointer_attribute attribute_, CUdeviceptr p) {
  RGPU_INIT();
  if (!data) return CUDA_ERROR_INVALID_VALUE;
  return attribute(data, attribute_, p);
}

namespace {
// Bytes of an attribute's value (cuda.h's documentation of CUpointer_attribute).
size_t attribute_size(CUpointer_attribute a) {
  switch (a) {
    case CU_POINTER_ATTRIBUTE_MEMORY_TYPE:
    case CU_POINTER_ATTRIBUTE_SYNC_MEMOPS:
    case CU_POINTER_ATTRIBUTE_IS_MANAGED:
    case CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL:
    case CU_POINTER_ATTRIBUTE_IS_LEGACY_CUDA_IPC_CAPABLE:
    case CU_POINTER_ATTRIBUTE_MAPPED:
    case CU_POINTER_ATTRIBUTE_IS_GPU_DIRECT_RDMA_CAPABLE:
    case CU_POINTER_ATTRIBUTE_ACCESS_FLAGS:
    case CU_POINTER_ATTRIBUTE_IS_HW_DECOMPRESS_CAPABLE:
      return 4;
    case CU_POINTER_ATTRIBUTE_P2P_TOKENS:
      return sizeof(CUDA_POINTER_ATTRIBUTE_P2P_TOKENS);
    default:
      return 8;
  }
}
}  // namespace

RGPU_CU CUresult cuPointerGetAttributes(unsigned int numAttributes, CUpointer_attribute* attributes,
                                        void** data, CUdeviceptr p) {
  RGPU_INIT();
  if (!attributes || !data) return CUDA_ERROR_INVALID_VALUE;
  // Unlike the single query, an attribute that does not apply gets its default (zero, NULL)
  // rather than failing the call, as the driver does; a memory type of 0 says "not CUDA memory".
  for (unsigned i = 0; i < numAttributes; ++i) {
    if (!data[i]) return CUDA_ERROR_INVALID_VALUE;
    if (attribute(data[i], attributes[i], p) != CUDA_SUCCESS)
      std::memset(data[i], 0, attribute_size(attributes[i]));
  }
  return CUDA_SUCCESS;
}
