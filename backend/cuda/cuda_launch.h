// Attributed launches on the cuda backend: rgpu's launch attributes as the driver's
// CUlaunchAttribute list and CUlaunchConfig (cuLaunchKernelEx, cluster occupancy queries).
#pragma once

#include <cuda.h>

#include <string>
#include <vector>

#include "backend/executor.h"

namespace rgpu::backend {

// The driver's attribute for each of ours (events are already CUevent handles).  False with
// `error` naming an attribute id this build does not know.
bool to_cu_attributes(const std::vector<LaunchAttribute>& in, std::vector<CUlaunchAttribute>& out,
                      std::string& error);

// A launch configuration over `attrs` (which must outlive it).
CUlaunchConfig launch_config(const LaunchDims& dims, CUstream stream,
                             std::vector<CUlaunchAttribute>& attrs);

}  // namespace rgpu::backend
