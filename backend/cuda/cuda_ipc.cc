#include "backend/cuda/cuda_ipc.h"

#include <cstdint>
#include <string>

namespace rgpu::backend {
namespace {

Status fail(const CudaDriver& drv, CUresult r, const std::string& what) {
  // CUresult and cudaError_t share their numbers for the codes these calls return.
  return Status::fail(static_cast<CudaError>(r), what + ": " + drv.describe(r));
}

}  // namespace

Status cuda_ipc_export(const CudaDriver& drv, uint64_t ptr, int& fd, uint64_t& base,
                       uint64_t& size) {
  CUdeviceptr b = 0;
  size_t n = 0;
  if (CUresult r = drv.cuMemGetAddressRange_v2(&b, &n, ptr); r != CUDA_SUCCESS)
    return fail(drv, r, "cuMemGetAddressRange of the memory to export");
  CUmemGenericAllocationHandle h = 0;
  if (CUresult r = drv.cuMemRetainAllocationHandle(&h, reinterpret_cast<void*>(ptr));
      r != CUDA_SUCCESS)
    return fail(drv, r, "cuMemRetainAllocationHandle of the memory to export");
  int out = -1;
  CUresult r =
      drv.cuMemExportToShareableHandle(&out, h, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0);
  drv.cuMemRelease(h);
  if (r != CUDA_SUCCESS)
    return Status::fail(err::NotSupported,
                        "cuMemExportToShareableHandle refused (the memory was created without a "
                        "POSIX file descriptor handle, see rgpud's log): " +
                            drv.describe(r));
  fd = out;
  base = b;
  size = n;
  return Status::success();
}

Status cuda_ipc_import(const CudaDriver& drv, CUdevice dev, int fd, uint64_t addr, uint64_t size) {
  CUmemGenericAllocationHandle h = 0;
  if (CUresult r =
          drv.cuMemImportFromShareableHandle(&h, reinterpret_cast<void*>(static_cast<intptr_t>(fd)),
                                             CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR);
      r != CUDA_SUCCESS)
    return fail(drv, r, "cuMemImportFromShareableHandle of an IPC handle's memory");
  CUresult r = drv.cuMemMap(addr, size, 0, h, 0);
  drv.cuMemRelease(h);  // the mapping keeps the memory
  if (r != CUDA_SUCCESS) return fail(drv, r, "cuMemMap of an IPC handle's memory");
  CUmemAccessDesc a{};
  a.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  a.location.id = dev;
  a.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
  if (r = drv.cuMemSetAccess(addr, size, &a, 1); r != CUDA_SUCCESS) {
    drv.cuMemUnmap(addr, size);
    return fail(drv, r, "cuMemSetAccess of an IPC handle's memory");
  }
  return Status::success();
}

}  // namespace rgpu::backend
