// Managed memory through the driver API (cuMemAllocManaged, prefetches, advice, range attributes,
// stream attachment): the client core's emulation (client/managed.cc), as the runtime uses it.
#include <vector>

#include "frontend/cuda/api.h"

using namespace rgpu;
using rgpu::cuda_fe::core;
using rgpu::cuda_fe::dptr;
using rgpu::cuda_fe::ptr;
using rgpu::cuda_fe::to_driver;

namespace {

// A CUmemLocation as the core names it: a device ordinal, or kCpuDevice for the host.
CUresult location_of(const CUmemLocation& loc, int* out) {
  switch (loc.type) {
    case CU_MEM_LOCATION_TYPE_DEVICE:
      *out = loc.id;
      return CUDA_SUCCESS;
    case CU_MEM_LOCATION_TYPE_HOST:
    case CU_MEM_LOCATION_TYPE_HOST_NUMA:
    case CU_MEM_LOCATION_TYPE_HOST_NUMA_CURRENT:
      *out = client::Client::kCpuDevice;
      return CUDA_SUCCESS;
    default:
      return CUDA_ERROR_INVALID_VALUE;
  }
}

// The first prefetch and advice forms name a device ordinal or CU_DEVICE_CPU (-1).
int location_of(CUdevice dev) { return dev == CU_DEVICE_CPU ? client::Client::kCpuDevice : dev; }

CUresult prefetch(CUdeviceptr p, size_t n, int where, CUstream hStream, bool pt) {
  RGPU_INIT();
  client::Stream s;
  if (client::Error e = cuda_fe::stream_of(hStream, pt, &s); e != err::Success) return to_driver(e);
  return to_driver(core().mem_prefetch(ptr(p), n, where));
}

CUresult advise(CUdeviceptr p, size_t n, CUmem_advise advice, int where) {
  RGPU_INIT();
  // CUmem_advise numbers are cudaMemoryAdvise's.
  return to_driver(core().mem_advise(ptr(p), n, static_cast<int>(advice), where));
}

bool needs_location(CUmem_advise advice) {
  return advice == CU_MEM_ADVISE_SET_PREFERRED_LOCATION ||
         advice == CU_MEM_ADVISE_SET_ACCESSED_BY || advice == CU_MEM_ADVISE_UNSET_ACCESSED_BY;
}

CUresult attach(CUstream hStream, CUdeviceptr p, size_t length, unsigned flags, bool pt) {
  RGPU_INIT();
  client::Stream s;
  if (client::Error e = cuda_fe::stream_of(hStream, pt, &s); e != err::Success) return to_driver(e);
  return to_driver(core().stream_attach(s, ptr(p), length, flags));
}

}  // namespace

RGPU_CU CUresult cuMemAllocManaged(CUdeviceptr* dp, size_t bytesize, unsigned int flags) {
  RGPU_INIT();
  int dev = 0;
  if (client::Error e = cuda_fe::current_device(&dev); e != err::Success) return to_driver(e);
  if (!dp) return CUDA_ERROR_INVALID_VALUE;
  void* p = nullptr;
  CUresult r = to_driver(core().malloc_managed(dev, bytesize, flags, &p));
  if (r == CUDA_SUCCESS) *dp = dptr(p);
  return r;
}

RGPU_CU CUresult cuMemPrefetchAsync_v2(CUdeviceptr devPtr, size_t count, CUmemLocation location,
                                       unsigned int flags, CUstream hStream) {
  int where = 0;
  if (CUresult r = location_of(location, &where); r != CUDA_SUCCESS || flags != 0)
    return CUDA_ERROR_INVALID_VALUE;
  return prefetch(devPtr, count, where, hStream, false);
}
RGPU_CU CUresult cuMemPrefetchAsync_v2_ptsz(CUdeviceptr devPtr, size_t count,
                                            CUmemLocation location, unsigned int flags,
                                            CUstream hStream) {
  int where = 0;
  if (CUresult r = location_of(location, &where); r != CUDA_SUCCESS || flags != 0)
    return CUDA_ERROR_INVALID_VALUE;
  return prefetch(devPtr, count, where, hStream, true);
}

#undef cuMemPrefetchAsync
#undef cuMemPrefetchAsync_ptsz
RGPU_CU CUresult cuMemPrefetchAsync(CUdeviceptr devPtr, size_t count, CUdevice dstDevice,
                                    CUstream hStream) {
  return prefetch(devPtr, count, location_of(dstDevice), hStream, false);
}
RGPU_CU CUresult cuMemPrefetchAsync_ptsz(CUdeviceptr devPtr, size_t count, CUdevice dstDevice,
                                         CUstream hStream) {
  return prefetch(devPtr, count, location_of(dstDevice), hStream, true);
}

RGPU_CU CUresult cuMemAdvise_v2(CUdeviceptr devPtr, size_t count, CUmem_advise advice,
                                CUmemLocation location) {
  int where = 0;
  if (needs_location(advice))
    if (CUresult r = location_of(location, &where); r != CUDA_SUCCESS) return r;
  return advise(devPtr, count, advice, where);
}

#undef cuMemAdvise
RGPU_CU CUresult cuMemAdvise(CUdeviceptr devPtr, size_t count, CUmem_advise advice,
                             CUdevice device) {
  return advise(devPtr, count, advice, needs_location(advice) ? location_of(device) : 0);
}

RGPU_CU CUresult cuMemRangeGetAttribute(void* data, size_t dataSize,
                                        CUmem_range_attribute attribute, CUdeviceptr devPtr,
                                        size_t count) {
  RGPU_INIT();
  client::ManagedRange r;
  if (client::Error e = core().mem_range(ptr(devPtr), count, &r); e != err::Success)
    return to_driver(e);
  return to_driver(client::write_range_attribute(data, dataSize, attribute, r));
}

RGPU_CU CUresult cuMemRangeGetAttributes(void** data, size_t* dataSizes,
                                         CUmem_range_attribute* attributes, size_t numAttributes,
                                         CUdeviceptr devPtr, size_t count) {
  RGPU_INIT();
  if (!data || !dataSizes || !attributes || numAttributes == 0) return CUDA_ERROR_INVALID_VALUE;
  client::ManagedRange r;
  if (client::Error e = core().mem_range(ptr(devPtr), count, &r); e != err::Success)
    return to_driver(e);
  for (size_t i = 0; i < numAttributes; ++i)
    if (client::Error e = client::write_range_attribute(data[i], dataSizes[i], attributes[i], r);
        e != err::Success)
      return to_driver(e);
  return CUDA_SUCCESS;
}

#undef cuStreamAttachMemAsync
RGPU_CU CUresult cuStreamAttachMemAsync(CUstream hStream, CUdeviceptr dp, size_t length,
                                        unsigned int flags) {
  return attach(hStream, dp, length, flags, false);
}
RGPU_CU CUresult cuStreamAttachMemAsync_ptsz(CUstream hStream, CUdeviceptr dp, size_t length,
                                             unsigned int flags) {
  return attach(hStream, dp, length, flags, true);
}

// ---- the batch forms (Client::mem_batch)

namespace {

CUresult batch(CUdeviceptr* ptrs, size_t* sizes, size_t count, CUmemLocation* locs, size_t* idxs,
               size_t nlocs, unsigned long long flags, CUstream hStream, bool pt, bool discard,
               bool prefetch_too) {
  RGPU_INIT();
  client::Stream s;
  if (client::Error e = cuda_fe::stream_of(hStream, pt, &s); e != err::Success) return to_driver(e);
  if (flags != 0) return CUDA_ERROR_INVALID_VALUE;
  if (hStream == nullptr && !pt) return CUDA_ERROR_INVALID_VALUE;  // not the legacy stream
  std::vector<int> where(prefetch_too && locs ? nlocs : 0);
  for (size_t j = 0; j < where.size(); ++j)
    if (CUresult r = location_of(locs[j], &where[j]); r != CUDA_SUCCESS) return r;
  static_assert(sizeof(CUdeviceptr) == sizeof(void*));
  return to_driver(core().mem_batch(reinterpret_cast<void* const*>(ptrs), sizes, count,
                                    where.data(), idxs, prefetch_too ? nlocs : 0, discard,
                                    prefetch_too));
}

}  // namespace

RGPU_CU CUresult cuMemPrefetchBatchAsync(CUdeviceptr* dptrs, size_t* sizes, size_t count,
                                         CUmemLocation* prefetchLocs, size_t* prefetchLocIdxs,
                                         size_t numPrefetchLocs, unsigned long long flags,
                                         CUstream hStream) {
  return batch(dptrs, sizes, count, prefetchLocs, prefetchLocIdxs, numPrefetchLocs, flags, hStream,
               false, false, true);
}
RGPU_CU CUresult cuMemPrefetchBatchAsync_ptsz(CUdeviceptr* dptrs, size_t* sizes, size_t count,
                                              CUmemLocation* prefetchLocs, size_t* prefetchLocIdxs,
                                              size_t numPrefetchLocs, unsigned long long flags,
                                              CUstream hStream) {
  return batch(dptrs, sizes, count, prefetchLocs, prefetchLocIdxs, numPrefetchLocs, flags, hStream,
               true, false, true);
}
RGPU_CU CUresult cuMemDiscardBatchAsync(CUdeviceptr* dptrs, size_t* sizes, size_t count,
                                        unsigned long long flags, CUstream hStream) {
  return batch(dptrs, sizes, count, nullptr, nullptr, 0, flags, hStream, false, true, false);
}
RGPU_CU CUresult cuMemDiscardBatchAsync_ptsz(CUdeviceptr* dptrs, size_t* sizes, size_t count,
                                             unsigned long long flags, CUstream hStream) {
  return batch(dptrs, sizes, count, nullptr, nullptr, 0, flags, hStream, true, true, false);
}
RGPU_CU CUresult cuMemDiscardAndPrefetchBatchAsync(CUdeviceptr* dptrs, size_t* sizes, size_t count,
                                                   CUmemLocation* prefetchLocs,
                                                   size_t* prefetchLocIdxs, size_t numPrefetchLocs,
                                                   unsigned long long flags, CUstream hStream) {
  return batch(dptrs, sizes, count, prefetchLocs, prefetchLocIdxs, numPrefetchLocs, flags, hStream,
               false, true, true);
}
RGPU_CU CUresult cuMemDiscardAndPrefetchBatchAsync_ptsz(
    CUdeviceptr* dptrs, size_t* sizes, size_t count, CUmemLocation* prefetchLocs,
    size_t* prefetchLocIdxs, size_t numPrefetchLocs, unsigned long long flags, CUstream hStream) {
  return batch(dptrs, sizes, count, prefetchLocs, prefetchLocIdxs, numPrefetchLocs, flags, hStream,
               true, true, true);
}
