// The batch forms of managed-memory prefetches and discards, shared by both front-ends.
#include "client/client.h"

namespace rgpu::client {

CudaError Client::mem_batch(void* const* ptrs, const size_t* sizes, size_t count, const int* where,
                            const size_t* idxs, size_t nlocs, bool discard, bool prefetch) {
  if (!ptrs || !sizes || count == 0) return err::InvalidValue;
  if (prefetch) {
    if (!where || !idxs || nlocs == 0 || nlocs > count || idxs[0] != 0) return err::InvalidValue;
    for (size_t j = 1; j < nlocs; ++j)
      if (idxs[j] <= idxs[j - 1] || idxs[j] >= count) return err::InvalidValue;
  }
  size_t j = 0;
  for (size_t i = 0; i < count; ++i) {
    if (discard)
      if (CudaError e = mem_discard(ptrs[i], sizes[i]); e != err::Success) return e;
    if (!prefetch) continue;
    while (j + 1 < nlocs && idxs[j + 1] <= i) ++j;
    if (CudaError e = mem_prefetch(ptrs[i], sizes[i], where[j]); e != err::Success) return e;
  }
  return err::Success;
}

}  // namespace rgpu::client
