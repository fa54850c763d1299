#include "backend/host/host_launch.h"

#include <algorithm>
#include <string>

namespace rgpu::backend {

namespace {

// The emulated device (host_executor.cc's attributes): 132 SMs, 2048 threads and 32 blocks per
// SM, 228 KiB of shared memory per SM (227 KiB per block at most), portable clusters of 8.
constexpr int kSms = 132;
constexpr int kThreadsPerSm = 2048;
constexpr int kBlocksPerSm = 32;
constexpr uint64_t kSmemPerSm = 233472;
constexpr uint64_t kSmemPerBlock = 232448;
constexpr uint64_t kMaxClusterBlocks = 8;
constexpr CudaError kCooperativeLaunchTooLarge = 720;
constexpr CudaError kInvalidClusterSize = 912;

int blocks_per_sm(uint64_t threads) {
  if (threads == 0) return 0;
  return static_cast<int>(std::min<uint64_t>(kBlocksPerSm, kThreadsPerSm / threads));
}

uint64_t threads_of(const LaunchDims& d) { return uint64_t(d.block[0]) * d.block[1] * d.block[2]; }

// The cluster dimensions the attributes ask for ({1,1,1} when none).
void cluster_of(const std::vector<LaunchAttribute>& attrs, uint64_t c[3]) {
  c[0] = c[1] = c[2] = 1;
  for (const LaunchAttribute& a : attrs)
    if (a.id == 4)
      for (int i = 0; i < 3; ++i) c[i] = a.v[i];
}

}  // namespace

Status plan_host_launch(const LaunchDims& dims, const std::vector<LaunchAttribute>& attrs,
                        rgpu_host_launch& l, HostLaunchPlan& plan) {
  for (const LaunchAttribute& a : attrs) {
    switch (a.id) {
      case 0:   // ignore
      case 1:   // access policy window: a cache hint
      case 3:   // synchronization policy (streams only; the driver ignores it for launches)
      case 9:   // memsync domain map
      case 10:  // memsync domain
      case 11:  // preferred cluster dimension: a hint
      case 13:  // device updatable kernel node
      case 14:  // shared memory carveout: a hint
      case 16:  // NVLink-centric scheduling: a hint
        break;
      case 2:
        l.cooperative = a.v[0] != 0;
        break;
      case 4:
        for (int i = 0; i < 3; ++i) {
          if (a.v[i] == 0 || dims.grid[i] % a.v[i] != 0)
            return Status::fail(kInvalidClusterSize, "cluster dimension " + std::to_string(a.v[i]) +
                                                         " does not divide grid dimension " +
                                                         std::to_string(dims.grid[i]));
          l.cluster[i] = static_cast<unsigned>(a.v[i]);
        }
        if (uint64_t(l.cluster[0]) * l.cluster[1] * l.cluster[2] > kMaxClusterBlocks)
          return Status::fail(kInvalidClusterSize,
                              "a cluster of more than 8 blocks is not portable (the host backend "
                              "allows 8)");
        break;
      case 5:
        l.cluster_scheduling = static_cast<int>(a.v[0]);
        break;
      case 6:
        l.programmatic_serialization = static_cast<int>(a.v[0]);
        break;
      case 7:
      case 12:
        plan.events.push_back(a.v[0]);
        break;
      case 8:
        l.priority = static_cast<int>(a.v[0]);
        break;
      default:
        return Status::fail(err::InvalidValue,
                            "launch attribute " + std::to_string(a.id) + " is unknown");
    }
    if (a.id < 32) l.attributes |= 1u << a.id;
  }
  if (l.cooperative) {
    const uint64_t blocks = uint64_t(dims.grid[0]) * dims.grid[1] * dims.grid[2];
    const uint64_t resident = uint64_t(kSms) * blocks_per_sm(threads_of(dims));
    if (blocks > resident)
      return Status::fail(kCooperativeLaunchTooLarge,
                          "a cooperative launch of " + std::to_string(blocks) +
                              " blocks does not fit the device at once (at most " +
                              std::to_string(resident) + ")");
  }
  return Status::success();
}

Status host_occupancy_cluster(int query, const LaunchDims& dims,
                              const std::vector<LaunchAttribute>& attrs, int32_t& value) {
  const uint64_t threads = threads_of(dims);
  if (threads == 0 || threads > 1024)
    return Status::fail(err::InvalidValue, "block size out of range for an occupancy query");
  if (query == 1) {
    value = static_cast<int32_t>(kMaxClusterBlocks);
    return Status::success();
  }
  uint64_t c[3];
  cluster_of(attrs, c);
  const uint64_t size = c[0] * c[1] * c[2];
  if (size == 0 || size > kMaxClusterBlocks)
    return Status::fail(kInvalidClusterSize, "cluster size out of range for an occupancy query");
  value = static_cast<int32_t>(uint64_t(kSms) * blocks_per_sm(threads) / size);
  return Status::success();
}

Status host_occupancy_dynamic_smem(int32_t blocks, int32_t block_size, uint64_t& bytes) {
  if (blocks <= 0 || block_size <= 0 || block_size > 1024)
    return Status::fail(err::InvalidValue, "blocks and block size must be positive");
  if (blocks > blocks_per_sm(static_cast<uint64_t>(block_size))) {
    bytes = 0;
    return Status::success();
  }
  bytes = std::min<uint64_t>(kSmemPerBlock, kSmemPerSm / static_cast<uint64_t>(blocks));
  return Status::success();
}

}  // namespace rgpu::backend
