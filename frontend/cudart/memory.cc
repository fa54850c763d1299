// Memory management and copies.
#include <functional>

#include "frontend/cudart/api.h"
#include "frontend/cudart/graph_nodes.h"

using namespace rgpu;
using rgpu::cudart::core;
using rgpu::cudart::ret;

namespace {

client::CopyKind kind_of(cudaMemcpyKind k) { return static_cast<client::CopyKind>(k); }

}  // namespace

#define RGPU_EXPORT extern "C" __attribute__((visibility("default")))

extern "C" {

cudaError_t cudaMalloc(void** devPtr, size_t size) {
  // Prohibited by a stream capture's mode (frontend/cudart/graphs.cc)?
  if (cudaError_t e = rgpu::cudart::unsafe_call(); e != cudaSuccess) return e;
  return ret(core().malloc(core().current_device(), size, devPtr));
}

cudaError_t cudaFree(void* devPtr) { return ret(core().free(devPtr)); }

cudaError_t cudaMallocHost(void** ptr, size_t size) {
  return ret(core().host_alloc(ptr, size, cudaHostAllocDefault));
}

cudaError_t cudaHostAlloc(void** pHost, size_t size, unsigned int flags) {
  constexpr unsigned kKnown =
      cudaHostAllocPortable | cudaHostAllocMapped | cudaHostAllocWriteCombined;
  if (flags & ~kKnown) return ret(err::InvalidValue);
  return ret(core().host_alloc(pHost, size, flags));
}

cudaError_t cudaFreeHost(void* ptr) { return ret(core().host_free(ptr)); }

cudaError_t cudaHostRegister(void* ptr, size_t size, unsigned int flags) {
  constexpr unsigned kKnown = cudaHostRegisterPortable | cudaHostRegisterMapped |
                              cudaHostRegisterIoMemory | cudaHostRegisterReadOnly;
  if (flags & ~kKnown) return ret(err::InvalidValue);
  return ret(core().host_register(ptr, size, flags));
}

cudaError_t cudaHostUnregister(void* ptr) { return ret(core().host_unregister(ptr)); }

cudaError_t cudaMemGetInfo(size_t* free, size_t* total) {
  if (!free || !total) return ret(err::InvalidValue);
  return ret(core().mem_get_info(core().current_device(), free, total));
}

cudaError_t cudaMemcpy(void* dst, const void* src, size_t count, cudaMemcpyKind kind) {
  return ret(core().memcpy(dst, src, count, kind_of(kind)));
}

cudaError_t cudaMemcpy2D(void* dst, size_t dpitch, const void* src, size_t spitch, size_t width,
                         size_t height, cudaMemcpyKind kind) {
  return ret(core().memcpy2d(dst, dpitch, src, spitch, width, height, kind_of(kind)));
}

cudaError_t cudaMemset(void* devPtr, int value, size_t count) {
  return ret(core().memset(devPtr, value, count));
}

cudaError_t cudaPointerGetAttributes(cudaPointerAttributes* attributes, const void* ptr) {
  if (!attributes) return ret(err::InvalidValue);
  client::PointerInfo pi = core().pointer_info(ptr);
  *attributes = cudaPointerAttributes{};
  attributes->device = pi.device;
  switch (pi.type) {
    case client::MemoryType::Device:
      attributes->type = cudaMemoryTypeDevice;
      attributes->devicePointer = const_cast<void*>(ptr);
      break;
    case client::MemoryType::Host:
      // Page-locked client memory: a device pointer only where the session maps it for the GPU
      // at the same address (shared memory; see client/pools.cc).
      attributes->type = cudaMemoryTypeHost;
      attributes->hostPointer = const_cast<void*>(ptr);
      if (pi.mapped) attributes->devicePointer = const_cast<void*>(ptr);
      break;
    case client::MemoryType::Managed:  // one address on host and device (client/managed.cc)
      attributes->type = cudaMemoryTypeManaged;
      attributes->devicePointer = const_cast<void*>(ptr);
      attributes->hostPointer = const_cast<void*>(ptr);
      break;
    case client::MemoryType::Unregistered:
      attributes->type = cudaMemoryTypeUnregistered;
      break;
  }
  return cudaSuccess;
}

}  // extern "C"

// Per-thread-default-stream variants (--default-stream per-thread): the synchronous calls work on
// the calling thread's default stream, and wait for it.
namespace {
cudaError_t on_thread_stream(const std::function<CudaError(const client::Stream&)>& op, bool wait) {
  client::Stream s;
  if (CudaError e = rgpu::cudart::stream_arg(nullptr, true, &s); e != err::Success) return ret(e);
  CudaError e = op(s);
  if (e == err::Success && wait) e = core().stream_synchronize(s);
  return ret(e);
}
}  // namespace

RGPU_EXPORT cudaError_t cudaMemcpy_ptds(void* dst, const void* src, size_t count,
                                        cudaMemcpyKind kind) {
  return on_thread_stream(
      [&](const client::Stream& s) {
        return core().memcpy2d_async(dst, count, src, count, count, 1, kind_of(kind), s);
      },
      true);
}
RGPU_EXPORT cudaError_t cudaMemcpy2D_ptds(void* dst, size_t dpitch, const void* src, size_t spitch,
                                          size_t width, size_t height, cudaMemcpyKind kind) {
  return on_thread_stream(
      [&](const client::Stream& s) {
        return core().memcpy2d_async(dst, dpitch, src, spitch, width, height, kind_of(kind), s);
      },
      true);
}
RGPU_EXPORT cudaError_t cudaMemset_ptds(void* devPtr, int value, size_t count) {
  return on_thread_stream(
      [&](const client::Stream& s) { return core().memset_async(devPtr, value, count, s); }, false);
}
