#include <algorithm>
#include <string>

#include "backend/executor.h"

namespace rgpu::backend {
namespace {
constexpr uint32_t kMaxThreadsPerBlock = 1, kWarpSize = 10, kSmCount = 16, kThreadsPerSm = 39;

int32_t attribute(const DeviceInfo& info, uint32_t id) {
  for (const auto& [a, v] : info.attrs)
    if (a == id) return v;
  return 0;
}
}  // namespace

Status occupancy_search(Executor& e, int dev, uint64_t kernel, int32_t limit, uint32_t flags,
                        const std::function<bool(int32_t, uint64_t&)>& smem_of, int32_t& min_grid,
                        int32_t& block_size, int32_t& need) {
  need = 0;
  DeviceInfo info;
  if (Status s = e.device_info(dev, info); !s.ok()) return s;
  std::vector<int32_t> fattrs;
  if (Status s = e.func_attributes(dev, kernel, fattrs); !s.ok()) return s;
  const int32_t warp = attribute(info, kWarpSize), sms = attribute(info, kSmCount),
                per_sm = attribute(info, kThreadsPerSm);
  int32_t max_block = attribute(info, kMaxThreadsPerBlock);
  if (!fattrs.empty()) max_block = std::min(max_block, fattrs[0]);
  if (limit > 0) max_block = std::min(max_block, limit);
  if (warp <= 0 || sms <= 0 || max_block <= 0)
    return Status::fail(
        err::InvalidValue,
        "occupancy search: the device reports no warp size, SM count or block size");
  int32_t best_threads = 0, best_block = 0, best_blocks = 0;
  const int32_t top = (max_block + warp - 1) / warp * warp;
  for (int32_t aligned = top; aligned > 0; aligned -= warp) {
    const int32_t bs = std::min(max_block, aligned);
    uint64_t smem = 0;
    if (!smem_of(bs, smem)) {
      need = bs;
      return Status::success();
    }
    int32_t blocks = 0;
    if (Status s = e.occupancy(dev, kernel, bs, smem, flags, blocks); !s.ok()) return s;
    if (bs * blocks > best_threads) {
      best_threads = bs * blocks;
      best_block = bs;
      best_blocks = blocks;
      if (best_threads == per_sm) break;  // no block size does better
    }
  }
  min_grid = best_blocks * sms;
  block_size = best_block;
  return Status::success();
}

Status Executor::occupancy_block_size(int dev, uint64_t kernel, uint64_t dynamic_smem,
                                      int32_t limit, uint32_t flags, int32_t& min_grid,
                                      int32_t& block_size) {
  int32_t need = 0;
  return occupancy_search(
      *this, dev, kernel, limit, flags,
      [&](int32_t, uint64_t& smem) {
        smem = dynamic_smem;
        return true;
      },
      min_grid, block_size, need);
}

}  // namespace rgpu::backend
