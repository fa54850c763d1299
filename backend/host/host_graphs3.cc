#include "backend/host/host_graphs3.h"

#include <algorithm>
#include <cstring>
#include <string>

namespace rgpu::backend {

namespace {
Status bad(const std::string& what) { return Status::fail(err::InvalidValue, what); }
}  // namespace

void HostStreamAttributes::created(int dev, uint64_t stream, int priority) {
  std::lock_guard<std::mutex> lock(mu_);
  Values v;
  v.priority = std::clamp(priority, kGreatestPriority, kLeastPriority);
  streams_[{dev, stream}] = v;
}

void HostStreamAttributes::destroyed(int dev, uint64_t stream) {
  std::lock_guard<std::mutex> lock(mu_);
  streams_.erase({dev, stream});
}

HostStreamAttributes::Values& HostStreamAttributes::of(int dev, uint64_t stream) {
  return streams_[{dev, stream}];  // the default stream and streams made before: defaults
}

Status HostStreamAttributes::set(int dev, uint64_t stream, const LaunchAttribute& a) {
  std::lock_guard<std::mutex> lock(mu_);
  Values& v = of(dev, stream);
  switch (a.id) {
    case 1: {  // access policy window: hit ratio in [0, 1], properties normal/streaming/persisting
      float ratio;
      const uint32_t bits = static_cast<uint32_t>(a.v[2]);
      std::memcpy(&ratio, &bits, sizeof ratio);
      if (!(ratio >= 0.0f && ratio <= 1.0f))
        return bad("the access policy window's hit ratio is not between 0 and 1");
      if (static_cast<uint32_t>(a.v[3]) > 2 || (a.v[3] >> 32) > 2)
        return bad("the access policy window's hit or miss property is not an access property");
      if (a.v[1] > (128ull << 20))
        return bad("the access policy window is larger than the GPU's largest (128 MiB)");
      v.window = a;
      return Status::success();
    }
    case 3:  // synchronization policy: auto, spin, yield, blocking sync
      if (a.v[0] < 1 || a.v[0] > 4) return bad("bad synchronization policy");
      v.sync_policy = static_cast<uint32_t>(a.v[0]);
      return Status::success();
    case 8:  // priority: clamped to the range, as the driver does
      v.priority = std::clamp(static_cast<int>(static_cast<uint32_t>(a.v[0])), kGreatestPriority,
                              kLeastPriority);
      return Status::success();
    case 9:  // memory synchronization domain map: domains 0 and 1
      if (a.v[0] > 1 || a.v[1] > 1) return bad("a memory synchronization domain is 0 or 1");
      v.domain_default = static_cast<uint8_t>(a.v[0]);
      v.domain_remote = static_cast<uint8_t>(a.v[1]);
      return Status::success();
    case 10:
      if (a.v[0] > 1) return bad("a memory synchronization domain is 0 or 1");
      v.domain = static_cast<uint32_t>(a.v[0]);
      return Status::success();
    default:
      return bad("stream attribute " + std::to_string(a.id) + " does not exist");
  }
}

Status HostStreamAttributes::get(int dev, uint64_t stream, LaunchAttribute& a) {
  std::lock_guard<std::mutex> lock(mu_);
  const Values& v = of(dev, stream);
  const uint32_t id = a.id;
  a = LaunchAttribute{};
  a.id = id;
  switch (id) {
    case 1:
      a = v.window;
      a.id = 1;
      return Status::success();
    case 3:
      a.v[0] = v.sync_policy;
      return Status::success();
    case 8:
      a.v[0] = static_cast<uint32_t>(v.priority);
      return Status::success();
    case 9:
      a.v[0] = v.domain_default, a.v[1] = v.domain_remote;
      return Status::success();
    case 10:
      a.v[0] = v.domain;
      return Status::success();
    default:
      return bad("stream attribute " + std::to_string(id) + " does not exist");
  }
}

}  // namespace rgpu::backend
