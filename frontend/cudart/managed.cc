// Managed memory (cudaMallocManaged, prefetch, advice, range attributes, stream attachment),
// emulated by the client core (client/managed.cc; docs/architecture.md, "Managed memory").
#include <vector>

#include "frontend/cudart/api.h"

using namespace rgpu;
using rgpu::cudart::core;
using rgpu::cudart::ret;
using rgpu::cudart::stream_arg;

#define RGPU_EXPORT __attribute__((visibility("default")))

namespace {

// A location as the core names it: a device ordinal, or -1 for the host (any NUMA node).
CudaError location_of(const cudaMemLocation& loc, int* out) {
  switch (loc.type) {
    case cudaMemLocationTypeDevice:
      *out = loc.id;
      return err::Success;
    case cudaMemLocationTypeHost:
    case cudaMemLocationTypeHostNuma:
    case cudaMemLocationTypeHostNumaCurrent:
      *out = client::Client::kCpuDevice;
      return err::Success;
    default:
      return err::InvalidValue;
  }
}

cudaError_t prefetch(const void* p, size_t n, cudaMemLocation loc, unsigned flags,
                     cudaStream_t stream, bool pt) {
  client::Stream s;
  if (CudaError e = stream_arg(stream, pt, &s); e != err::Success) return ret(e);
  int where = 0;
  if (CudaError e = location_of(loc, &where); e != err::Success || flags != 0)
    return ret(err::InvalidValue);
  return ret(core().mem_prefetch(p, n, where));
}

// The batch forms (Client::mem_batch), with the locations as the core names them.
cudaError_t batch(void** ptrs, size_t* sizes, size_t count, cudaMemLocation* locs, size_t* idxs,
                  size_t nlocs, unsigned long long flags, cudaStream_t stream, bool pt,
                  bool discard, bool prefetch_too) {
  client::Stream s;
  if (CudaError e = stream_arg(stream, pt, &s); e != err::Success) return ret(e);
  if (flags != 0) return ret(err::InvalidValue);
  if (stream == nullptr && !pt) return ret(err::InvalidValue);  // not the legacy stream
  std::vector<int> where(prefetch_too && locs ? nlocs : 0);
  for (size_t j = 0; j < where.size(); ++j)
    if (CudaError e = location_of(locs[j], &where[j]); e != err::Success) return ret(e);
  return ret(core().mem_batch(ptrs, sizes, count, where.data(), idxs, prefetch_too ? nlocs : 0,
                              discard, prefetch_too));
}

cudaError_t attach(cudaStream_t stream, void* p, size_t length, unsigned flags, bool pt) {
  client::Stream s;
  if (CudaError e = stream_arg(stream, pt, &s); e != err::Success) return ret(e);
  return ret(core().stream_attach(s, p, length, flags));
}

}  // namespace

extern "C" {

cudaError_t cudaMallocManaged(void** devPtr, size_t size, unsigned int flags) {
  return ret(core().malloc_managed(core().current_device(), size, flags, devPtr));
}

cudaError_t cudaMemPrefetchAsync(const void* devPtr, size_t count, struct cudaMemLocation location,
                                 unsigned int flags, cudaStream_t stream) {
  return prefetch(devPtr, count, location, flags, stream, false);
}

RGPU_EXPORT cudaError_t cudaMemPrefetchAsync_ptsz(const void* devPtr, size_t count,
                                                  struct cudaMemLocation location,
                                                  unsigned int flags, cudaStream_t stream) {
  return prefetch(devPtr, count, location, flags, stream, true);
}

cudaError_t cudaMemPrefetchBatchAsync(void** dptrs, size_t* sizes, size_t count,
                                      struct cudaMemLocation* prefetchLocs, size_t* prefetchLocIdxs,
                                      size_t numPrefetchLocs, unsigned long long flags,
                                      cudaStream_t stream) {
  return batch(dptrs, sizes, count, prefetchLocs, prefetchLocIdxs, numPrefetchLocs, flags, stream,
               false, false, true);
}

RGPU_EXPORT cudaError_t cudaMemPrefetchBatchAsync_ptsz(void** dptrs, size_t* sizes, size_t count,
                                                       struct cudaMemLocation* prefetchLocs,
                                                       size_t* prefetchLocIdxs,
                                                       size_t numPrefetchLocs,
                                                       unsigned long long flags,
                                                       cudaStream_t stream) {
  return batch(dptrs, sizes, count, prefetchLocs, prefetchLocIdxs, numPrefetchLocs, flags, stream,
               true, false, true);
}

cudaError_t cudaMemDiscardBatchAsync(void** dptrs, size_t* sizes, size_t count,
                                     unsigned long long flags, cudaStream_t stream) {
  return batch(dptrs, sizes, count, nullptr, nullptr, 0, flags, stream, false, true, false);
}

RGPU_EXPORT cudaError_t cudaMemDiscardBatchAsync_ptsz(void** dptrs, size_t* sizes, size_t count,
                                                      unsigned long long flags,
                                                      cudaStream_t stream) {
  return batch(dptrs, sizes, count, nullptr, nullptr, 0, flags, stream, true, true, false);
}

cudaError_t cudaMemDiscardAndPrefetchBatchAsync(void** dptrs, size_t* sizes, size_t count,
                                                struct cudaMemLocation* prefetchLocs,
                                                size_t* prefetchLocIdxs, size_t numPrefetchLocs,
                                                unsigned long long flags, cudaStream_t stream) {
  return batch(dptrs, sizes, count, prefetchLocs, prefetchLocIdxs, numPrefetchLocs, flags, stream,
               false, true, true);
}

RGPU_EXPORT cudaError_t cudaMemDiscardAndPrefetchBatchAsync_ptsz(
    void** dptrs, size_t* sizes, size_t count, struct cudaMemLocation* prefetchLocs,
    size_t* prefetchLocIdxs, size_t numPrefetchLocs, unsigned long long flags,
    cudaStream_t stream) {
  return batch(dptrs, sizes, count, prefetchLocs, prefetchLocIdxs, numPrefetchLocs, flags, stream,
               true, true, true);
}

cudaError_t cudaMemAdvise(const void* devPtr, size_t count, enum cudaMemoryAdvise advice,
                          struct cudaMemLocation location) {
  int where = 0;
  const bool needs = advice == cudaMemAdviseSetPreferredLocation ||
                     advice == cudaMemAdviseSetAccessedBy || advice == cudaMemAdviseUnsetAccessedBy;
  if (needs) {
    if (CudaError e = location_of(location, &where); e != err::Success) return ret(e);
  }
  return ret(core().mem_advise(devPtr, count, static_cast<int>(advice), where));
}

cudaError_t cudaMemRangeGetAttribute(void* data, size_t dataSize,
                                     enum cudaMemRangeAttribute attribute, const void* devPtr,
                                     size_t count) {
  client::ManagedRange r;
  if (CudaError e = core().mem_range(devPtr, count, &r); e != err::Success) return ret(e);
  return ret(client::write_range_attribute(data, dataSize, attribute, r));
}

cudaError_t cudaMemRangeGetAttributes(void** data, size_t* dataSizes,
                                      enum cudaMemRangeAttribute* attributes, size_t numAttributes,
                                      const void* devPtr, size_t count) {
  if (!data || !dataSizes || !attributes || numAttributes == 0) return ret(err::InvalidValue);
  client::ManagedRange r;
  if (CudaError e = core().mem_range(devPtr, count, &r); e != err::Success) return ret(e);
  for (size_t i = 0; i < numAttributes; ++i)
    if (CudaError e = client::write_range_attribute(data[i], dataSizes[i], attributes[i], r);
        e != err::Success)
      return ret(e);
  return cudaSuccess;
}

cudaError_t cudaStreamAttachMemAsync(cudaStream_t stream, void* devPtr, size_t length,
                                     unsigned int flags) {
  return attach(stream, devPtr, length, flags, false);
}

RGPU_EXPORT cudaError_t cudaStreamAttachMemAsync_ptsz(cudaStream_t stream, void* devPtr,
                                                      size_t length, unsigned int flags) {
  return attach(stream, devPtr, length, flags, true);
}

}  // extern "C"
