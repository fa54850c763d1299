// Stream attributes on the host backend (Executor::stream_set_attribute / get_attribute): the
// values each stream holds, checked as the driver checks them, with the driver's defaults.
// The host backend runs kernels on the CPU: the values change nothing there, but a program reads
// back what it set and a bad value is refused as on a GPU.
#pragma once

#include <cstdint>
#include <map>
#include <mutex>
#include <utility>

#include "backend/executor.h"

namespace rgpu::backend {

class HostStreamAttributes {
 public:
  // Stream priorities go from 0 (least) to -5 (greatest), as stream_priority_range says.
  static constexpr int kLeastPriority = 0, kGreatestPriority = -5;
  void created(int dev, uint64_t stream, int priority);
  void destroyed(int dev, uint64_t stream);
  Status set(int dev, uint64_t stream, const LaunchAttribute& a);
  Status get(int dev, uint64_t stream, LaunchAttribute& a);

 private:
  struct Values {
    LaunchAttribute window{1, {0, 0, 0, 0}};
    uint32_t sync_policy = 1;  // cudaSyncPolicyAuto
    int priority = 0;
    uint8_t domain_default = 0, domain_remote = 1;
    uint32_t domain = 0;
  };
  Values& of(int dev, uint64_t stream);  // caller holds mu_
  std::mutex mu_;
  std::map<std::pair<int, uint64_t>, Values> streams_;
};

}  // namespace rgpu::backend
