// Attributed launches on the host backend (the test double): launch attributes are checked as the
// driver checks them and handed to the host kernel (rgpu_host_launch), so tests can observe what
// reached the server; events named by attributes are recorded after the kernel.
#pragma once

#include <cstdint>
#include <vector>

#include "backend/executor.h"
#include "backend/host/host_kernel_api.h"

namespace rgpu::backend {

// What the host backend does with a launch's attributes.
struct HostLaunchPlan {
  std::vector<uint64_t> events;  // to record after the kernel (completion, programmatic)
};

// Checks `attrs` against `dims` (cluster dimensions dividing the grid, at most 8 blocks per
// cluster, a cooperative grid that fits the emulated device at once, known ids) and fills the
// attribute fields of `launch`.
Status plan_host_launch(const LaunchDims& dims, const std::vector<LaunchAttribute>& attrs,
                        rgpu_host_launch& launch, HostLaunchPlan& plan);

// The emulated device's answers to the cluster and shared-memory occupancy queries.
Status host_occupancy_cluster(int query, const LaunchDims& dims,
                              const std::vector<LaunchAttribute>& attrs, int32_t& value);
Status host_occupancy_dynamic_smem(int32_t blocks, int32_t block_size, uint64_t& bytes);

}  // namespace rgpu::backend
