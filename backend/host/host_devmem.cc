#include "backend/host/host_devmem.h"

#include <string>

namespace rgpu::backend {
namespace {

// cudaLimit numbers.
enum : uint32_t {
  kStackSize = 0,
  kPrintfFifoSize = 1,
  kMallocHeapSize = 2,
  kDevRuntimeSyncDepth = 3,
  kDevRuntimePendingLaunchCount = 4,
  kMaxL2FetchGranularity = 5,
  kPersistingL2CacheSize = 6,
  kCigEnabled = 8,  // CU_LIMIT_CIG_ENABLED: query only; 0, no context shares a graphics context
};
constexpr uint64_t kPersistingL2Max = 0;  // attribute 108 of the emulated GPU

}  // namespace

HostDeviceState::HostDeviceState(int devices) {
  for (int i = 0; i < devices; ++i) {
    devices_.push_back(std::make_unique<Device>());
    defaults(*devices_.back());
  }
}

void HostDeviceState::defaults(Device& d) {
  // A new CUDA 13 context's values.
  d.limits = {{kStackSize, 1024},
              {kPrintfFifoSize, 1u << 20},
              {kMallocHeapSize, 8u << 20},
              {kDevRuntimeSyncDepth, 2},
              {kDevRuntimePendingLaunchCount, 2048},
              {kMaxL2FetchGranularity, 32},
              {kPersistingL2CacheSize, 0},
              {kCigEnabled, 0}};
  d.cache_config = 0;
  d.shared_mem_config = 1;
  d.profiling = false;
}

void HostDeviceState::reset(int dev) {
  std::lock_guard<std::mutex> lock(mu_);
  defaults(*devices_.at(dev));
  devices_[dev]->failure = err::Success;
}

void HostDeviceState::fail(int dev, CudaError e) {
  if (dev < 0 || dev >= static_cast<int>(devices_.size())) return;
  CudaError none = err::Success;
  devices_[dev]->failure.compare_exchange_strong(none, e);  // the first failure stays
}

Status HostDeviceState::failed(int dev) const {
  CudaError e = devices_.at(dev)->failure.load();
  if (e == err::Success) return Status::success();
  return Status::fail(e, "a kernel failed on emulated GPU " + std::to_string(dev) + " (error " +
                             std::to_string(e) + "); the device must be reset");
}

Status HostDeviceState::config(int dev, Executor::ConfigOp op, uint32_t key, uint64_t& value) {
  using Op = Executor::ConfigOp;
  if (dev < 0 || dev >= static_cast<int>(devices_.size()))
    return Status::fail(err::InvalidDevice, "no such emulated GPU " + std::to_string(dev));
  std::lock_guard<std::mutex> lock(mu_);
  Device& d = *devices_[dev];
  switch (op) {
    case Op::SetLimit: {
      auto it = d.limits.find(key);
      if (it == d.limits.end())
        return Status::fail(err::InvalidValue, "unknown limit " + std::to_string(key));
      if (key == kCigEnabled)
        return Status::fail(err::InvalidValue, "CU_LIMIT_CIG_ENABLED can only be queried");
      if (key == kMaxL2FetchGranularity && value > 128)
        return Status::fail(err::InvalidValue, "the L2 fetch granularity is at most 128 bytes");
      if (key == kPersistingL2CacheSize && value > kPersistingL2Max)
        return Status::fail(err::InvalidValue,
                            "the persisting L2 cache size exceeds the device's maximum");
      it->second = value;
      return Status::success();
    }
    case Op::GetLimit: {
      auto it = d.limits.find(key);
      if (it == d.limits.end())
        return Status::fail(err::InvalidValue, "unknown limit " + std::to_string(key));
      value = it->second;
      return Status::success();
    }
    case Op::SetCacheConfig:
      if (value > 3) return Status::fail(err::InvalidValue, "unknown cache configuration");
      d.cache_config = value;
      return Status::success();
    case Op::GetCacheConfig:
      value = d.cache_config;
      return Status::success();
    case Op::SetSharedMemConfig:
      if (value > 2) return Status::fail(err::InvalidValue, "unknown shared memory configuration");
      d.shared_mem_config = value;
      return Status::success();
    case Op::GetSharedMemConfig:
      value = d.shared_mem_config;
      return Status::success();
    case Op::ProfilerStart:
    case Op::ProfilerStop:
      d.profiling = op == Op::ProfilerStart;
      return Status::success();
    case Op::ResetPersistingL2:
      return Status::success();
    case Op::P2PAttribute: {
      if (value >= devices_.size() || static_cast<int>(value) == dev)
        return Status::fail(err::InvalidDevice, "P2P attributes need two different GPUs");
      // Emulated GPUs reach each other (can_access_peer says so): access, native atomics and
      // array access supported (so not "only partial" atomics), performance rank 0.
      if (key < 1 || key > 5) return Status::fail(err::InvalidValue, "unknown P2P attribute");
      value = key == 1 || key == 5 ? 0 : 1;
      return Status::success();
    }
  }
  return Status::fail(err::InvalidValue,
                      "unknown device setting " + std::to_string(static_cast<uint32_t>(op)));
}

}  // namespace rgpu::backend
