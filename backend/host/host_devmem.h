// The host backend's (test double's) context settings and kernel failures: limits, cache and
// shared-memory configuration, profiler state and P2P attributes are kept per emulated GPU with
// the values and checks of a CUDA context, and a host kernel that reports a device-side failure
// (assert, trap) makes the GPU's context fail with it until the device is reset, as on a GPU.
#pragma once

#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <vector>

#include "backend/executor.h"

namespace rgpu::backend {

class HostDeviceState {
 public:
  explicit HostDeviceState(int devices);
  Status config(int dev, Executor::ConfigOp op, uint32_t key, uint64_t& value);
  // Back to a new context's settings, and no failure (cudaDeviceReset).
  void reset(int dev);
  // A host kernel reported a device-side failure: sticky until reset.
  void fail(int dev, CudaError e);
  // Success, or the failure a kernel reported (with a message naming it).
  Status failed(int dev) const;

 private:
  struct Device {
    std::map<uint32_t, uint64_t> limits;
    uint64_t cache_config = 0;
    uint64_t shared_mem_config = 1;  // cudaSharedMemBankSizeFourByte
    bool profiling = false;
    std::atomic<CudaError> failure{err::Success};
  };
  static void defaults(Device& d);
  mutable std::mutex mu_;
  std::vector<std::unique_ptr<Device>> devices_;
};

}  // namespace rgpu::backend
