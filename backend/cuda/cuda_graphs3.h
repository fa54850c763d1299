// Stream attributes on the cuda backend (Executor::stream_set_attribute / get_attribute):
// rgpu's encoding of an attribute's value (LaunchAttribute) to and from the driver's
// CUstreamAttrValue, and cuStreamSetAttribute / cuStreamGetAttribute.
#pragma once

#include <cuda.h>

#include "backend/cuda/cuda_driver.h"
#include "backend/executor.h"

namespace rgpu::backend {

// A driver result as a Status (CUresult and cudaError_t share their numbers).
Status cuda_check(const CudaDriver& drv, CUresult r);

// The caller made the stream's context current.
Status cuda_stream_set_attribute(const CudaDriver& drv, CUstream stream, const LaunchAttribute& a);
Status cuda_stream_get_attribute(const CudaDriver& drv, CUstream stream, LaunchAttribute& a);

}  // namespace rgpu::backend
