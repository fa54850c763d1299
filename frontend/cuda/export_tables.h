// The private export tables of NVIDIA's driver ("cuGetExportTable"), as rgpu's libcuda.so.1 serves
// them to NVIDIA's runtime and libraries running on it (shared/reference/cuda-abi.md section 5.3).
#pragma once

namespace rgpu::cuda_fe {

// The table whose 16-byte UUID is `id`, or nullptr: the caller answers CUDA_ERROR_NOT_FOUND.
// An unknown UUID is logged once.
const void* find_export_table(const unsigned char id[16]);

// Called by the driver front-end when a context ends (cuCtxDestroy, the last release or a reset
// of a primary context): runs the destructors NVIDIA's runtime registered in its context-local
// storage for it, and forgets its entries. `ctx` is a CUcontext.
void context_ended(void* ctx);

}  // namespace rgpu::cuda_fe
