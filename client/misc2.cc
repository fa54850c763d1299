// Memory pools shared between client processes of one server (the misc2 group).
//
// A pool's shareable handle (cudaMemHandleTypePosixFileDescriptor) is a memfd this process makes:
// a tag, the server GPU and the device's server as the exporter named it.  The importer opens it as
// a pool of its own on the same server GPU (an empty server pool: attributes, trim and destroy work
// on it).  A pointer's export data is a CUDA IPC memory handle of the allocation (client/ipc.cc,
// registered with rgpud like cudaIpcGetMemHandle's), and importing it maps the memory inside the
// importer's window; cudaFree / cudaFreeAsync of the imported pointer unmaps it.
#include <sys/mman.h>
#include <unistd.h>

#include <cstring>

#include "client/client.h"
#include "common/log.h"

namespace rgpu::client {

using namespace rgpu::proto;

namespace {

constexpr char kPoolTag[8] = {'r', 'g', 'p', 'u', 'P', 'O', 'L', '1'};
constexpr size_t kGpuAt = 8, kServerAt = 16, kServerMax = Client::kPoolShareBytes - kServerAt;
constexpr unsigned kPosixFd = 1;  // cudaMemHandleTypePosixFileDescriptor

std::string server_of(const DeviceSpec& s) { return s.host + ":" + std::to_string(s.port); }

}  // namespace

CudaError Client::mem_pool_export_fd(MemPool* pool, unsigned handle_type, int* fd) {
  if (!fd || !live_pool(pool)) return err::InvalidValue;
  if (handle_type != kPosixFd || !(pool->handle_types & kPosixFd)) {
    LOG_ERROR(
        "cudaMemPoolExportToShareableHandle: the pool was not created with handle type %u "
        "(rgpu shares pools as cudaMemHandleTypePosixFileDescriptor only)",
        handle_type);
    return err::InvalidValue;
  }
  const DeviceSpec& spec = devices_[pool->device].spec;
  const std::string server = server_of(spec);
  if (server.size() >= kServerMax) return err::NotSupported;
  uint8_t data[kPoolShareBytes] = {};
  std::memcpy(data, kPoolTag, sizeof kPoolTag);
  std::memcpy(data + kGpuAt, &spec.gpu, sizeof spec.gpu);
  std::memcpy(data + kServerAt, server.data(), server.size());
  int f = memfd_create("rgpu-mem-pool", MFD_CLOEXEC);
  if (f < 0) return err::MemoryAllocation;
  if (pwrite(f, data, sizeof data, 0) != static_cast<ssize_t>(sizeof data)) {
    close(f);
    return err::MemoryAllocation;
  }
  *fd = f;
  return err::Success;
}

CudaError Client::mem_pool_import_fd(int fd, unsigned handle_type, MemPool** out) {
  if (!out) return err::InvalidValue;
  if (handle_type != kPosixFd) {
    LOG_ERROR(
        "cudaMemPoolImportFromShareableHandle: handle type %u is not shared by rgpu "
        "(cudaMemHandleTypePosixFileDescriptor only)",
        handle_type);
    return err::InvalidValue;
  }
  uint8_t data[kPoolShareBytes] = {};
  if (fd < 0 || pread(fd, data, sizeof data, 0) != static_cast<ssize_t>(sizeof data) ||
      std::memcmp(data, kPoolTag, sizeof kPoolTag) != 0) {
    LOG_ERROR(
        "cudaMemPoolImportFromShareableHandle: descriptor %d is not a pool exported by rgpu's "
        "cudaMemPoolExportToShareableHandle",
        fd);
    return err::InvalidValue;
  }
  uint32_t gpu = 0;
  std::memcpy(&gpu, data + kGpuAt, sizeof gpu);
  const std::string server(reinterpret_cast<const char*>(data + kServerAt),
                           strnlen(reinterpret_cast<const char*>(data + kServerAt), kServerMax));
  for (int d = 0; d < device_count(); ++d) {
    const DeviceSpec& s = devices_[d].spec;
    if (s.gpu != gpu || server_of(s) != server) continue;
    MemPool* p = nullptr;
    if (CudaError e = mem_pool_create(d, 0, &p); e != err::Success) return e;
    p->handle_types = kPosixFd;
    p->imported = true;
    *out = p;
    return err::Success;
  }
  LOG_ERROR(
      "cudaMemPoolImportFromShareableHandle: the pool lives on GPU %u of %s, which is none of "
      "this process's devices (RGPU_SERVERS)",
      gpu, server.c_str());
  return err::InvalidValue;
}

CudaError Client::mem_pool_export_pointer(void* ptr, uint8_t* data) {
  if (!ptr || !data) return err::InvalidValue;
  auto r = map_.find_device(reinterpret_cast<uint64_t>(ptr));
  if (!r || r->base != reinterpret_cast<uint64_t>(ptr) || !is_pool_allocation(r->base)) {
    LOG_ERROR("cudaMemPoolExportPointer: %p is not memory from cudaMallocAsync", ptr);
    return err::InvalidValue;
  }
  // Stream-ordered allocations are exported as cudaIpcGetMemHandle exports cudaMalloc memory.
  return ipc_get_mem_handle(ptr, data);
}

CudaError Client::mem_pool_import_pointer(MemPool* pool, const uint8_t* data, void** ptr) {
  if (!data || !ptr || !live_pool(pool)) return err::InvalidValue;
  if (!pool->imported) {
    LOG_ERROR(
        "cudaMemPoolImportPointer: the pool was not imported with "
        "cudaMemPoolImportFromShareableHandle");
    return err::InvalidValue;
  }
  void* p = nullptr;
  if (CudaError e = ipc_open_mem_handle(data, pool->device, &p); e != err::Success) return e;
  std::lock_guard<std::mutex> lock(pools_mu_);
  pool_imports_.insert(reinterpret_cast<uint64_t>(p));
  *ptr = p;
  return err::Success;
}

bool Client::is_pool_import(const void* ptr) {
  std::lock_guard<std::mutex> lock(pools_mu_);
  return pool_imports_.count(reinterpret_cast<uint64_t>(ptr)) > 0;
}

bool Client::pool_import_release(void* ptr, CudaError* e) {
  {
    std::lock_guard<std::mutex> lock(pools_mu_);
    if (!pool_imports_.erase(reinterpret_cast<uint64_t>(ptr))) return false;
  }
  *e = ipc_close_mem_handle(ptr);
  return true;
}

}  // namespace rgpu::client
