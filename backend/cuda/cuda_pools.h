// The cuda backend's part of the pools group: mapped page-locked memory.
#pragma once

#include <cstddef>

#include "backend/cuda/cuda_driver.h"
#include "backend/executor.h"

namespace rgpu::backend {

// Page-locks [p, p + size) for every GPU (portable) with a device mapping, and checks that the
// GPU uses the pointer itself (unified addressing), so that a kernel given `p` reads this memory.
// The caller made the session's primary context current.
Status cuda_host_register_mapped(const CudaDriver& drv, void* p, size_t size);

}  // namespace rgpu::backend
