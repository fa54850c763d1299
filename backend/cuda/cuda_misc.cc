#include "backend/cuda/cuda_misc.h"

#include <dlfcn.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string>

namespace rgpu::backend {
namespace {

using AtomicCapsFn = CUresult (*)(unsigned*, const CUatomicOperation*, unsigned, CUdevice);
using P2PAtomicCapsFn = CUresult (*)(unsigned*, const CUatomicOperation*, unsigned, CUdevice,
                                     CUdevice);

void* driver_symbol(const CudaDriver& drv, const char* name) {
  // The library CudaDriver::load chose (by name it could find rgpu's client library).
  return drv.handle ? dlsym(drv.handle, name) : nullptr;
}

Status fail(const CudaDriver& drv, CUresult r, const std::string& what) {
  return Status::fail(static_cast<CudaError>(r), what + ": " + drv.describe(r));
}

}  // namespace

Status cuda_atomic_caps(const CudaDriver& drv, CUdevice dev, CUdevice peer, bool host,
                        const std::vector<uint32_t>& ops, std::vector<uint32_t>& caps) {
  const char* name =
      host ? "cuDeviceGetHostAtomicCapabilities" : "cuDeviceGetP2PAtomicCapabilities";
  void* fn = driver_symbol(drv, name);
  if (!fn)
    return Status::fail(err::NotSupported, std::string("the server's NVIDIA driver lacks ") + name);
  std::vector<CUatomicOperation> cu_ops;
  for (uint32_t op : ops) cu_ops.push_back(static_cast<CUatomicOperation>(op));
  caps.assign(ops.size(), 0);
  const auto n = static_cast<unsigned>(ops.size());
  CUresult r =
      host ? reinterpret_cast<AtomicCapsFn>(fn)(caps.data(), cu_ops.data(), n, dev)
           : reinterpret_cast<P2PAtomicCapsFn>(fn)(caps.data(), cu_ops.data(), n, dev, peer);
  return r == CUDA_SUCCESS ? Status::success() : fail(drv, r, name);
}

Status cuda_ipc_event_export(const CudaDriver& drv, CUevent event, int& fd) {
  CUipcEventHandle h{};
  if (CUresult r = drv.cuIpcGetEventHandle(&h, event); r != CUDA_SUCCESS)
    return fail(drv, r, "cuIpcGetEventHandle");
  int m = memfd_create("rgpu-ipc-event", MFD_CLOEXEC);
  if (m < 0 || pwrite(m, &h, sizeof h, 0) != static_cast<ssize_t>(sizeof h)) {
    std::string why = strerror(errno);
    if (m >= 0) close(m);
    return Status::fail(err::MemoryAllocation,
                        "cannot keep an IPC event handle in a memfd: " + why);
  }
  fd = m;
  return Status::success();
}

Status cuda_ipc_event_import(const CudaDriver& drv, int fd, CUevent& event) {
  CUipcEventHandle h{};
  if (pread(fd, &h, sizeof h, 0) != static_cast<ssize_t>(sizeof h))
    return Status::fail(err::InvalidValue, "the IPC event export holds no event handle");
  if (CUresult r = drv.cuIpcOpenEventHandle(&event, h); r != CUDA_SUCCESS)
    return fail(drv, r, "cuIpcOpenEventHandle");
  return Status::success();
}

}  // namespace rgpu::backend
