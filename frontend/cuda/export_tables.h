// The private export tables of NVIDIA's driver ("cuGetExportTable"), as rgpu's libcuda.so.1 serves
// them to NVIDIA's runtime and libraries running on it (shared/reference/cuda-abi.md section 5.3).
#pragma once

namespace rgpu::cuda_fe {

// The table whose 16-byte UUID is `id`, or nullptr: the caller answers CUDA_ERROR_NOT_FOUND.
// An unknown UUID is logged once.
const void* find_export_table(const unsigned char id[16]);

}  // namespace rgpu::cuda_fe
