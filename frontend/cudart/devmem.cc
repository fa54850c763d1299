// Device and context calls (issue 11 item 6): device flags (on the client's primary context),
// limits, cache and shared-memory configuration, profiler and persisting L2 (forwarded to the
// server's context), PCI bus ids (from the attributes the server sent), P2P attributes, device
// choice and the valid-device list.
#include <cctype>
#include <cstdio>
#include <cstring>
#include <vector>

#include "frontend/cudart/api.h"
#pragma GCC visibility push(default)
#include <cuda_profiler_api.h>
#pragma GCC visibility pop
#include "proto/messages.h"

using namespace rgpu;
using rgpu::cudart::core;
using rgpu::cudart::ret;
using Op = rgpu::proto::DeviceConfigOp;

namespace {

cudaError_t config(Op op, uint32_t key, uint64_t* value) {
  return ret(core().device_config(core().current_device(), static_cast<uint32_t>(op), key, value));
}

// cudaDevAttr numbers of a device's PCI location.
constexpr uint32_t kPciBus = 33, kPciDevice = 34, kPciDomain = 50;

// "[domain]:[bus]:[device].[function]", "[domain]:[bus]:[device]", "[bus]:[device].[function]"
// or "[bus]:[device]", in hexadecimal.
bool parse_pci(const char* s, unsigned* domain, unsigned* bus, unsigned* device) {
  unsigned v[4];
  int fields = 0;
  const char* p = s;
  char seps[4] = {};
  while (fields < 4) {
    char* end = nullptr;
    if (!isxdigit(static_cast<unsigned char>(*p))) return false;
    unsigned long x = strtoul(p, &end, 16);
    if (end == p || x > 0xffffffffUL) return false;
    v[fields] = static_cast<unsigned>(x);
    seps[fields++] = *end;
    if (*end == '\0') break;
    if (*end != ':' && *end != '.') return false;
    p = end + 1;
  }
  // The separators say which form it is: a '.' comes before the function only.
  if (fields == 4 && seps[0] == ':' && seps[1] == ':' && seps[2] == '.') {
    *domain = v[0], *bus = v[1], *device = v[2];
  } else if (fields == 3 && seps[0] == ':' && seps[1] == ':') {
    *domain = v[0], *bus = v[1], *device = v[2];
  } else if (fields == 3 && seps[0] == ':' && seps[1] == '.') {
    *domain = 0, *bus = v[0], *device = v[1];
  } else if (fields == 2 && seps[0] == ':') {
    *domain = 0, *bus = v[0], *device = v[1];
  } else {
    return false;
  }
  return true;
}

}  // namespace

extern "C" {

cudaError_t cudaSetDeviceFlags(unsigned int flags) {
  const int dev = core().current_device();
  return ret(core().contexts().primary_set_flags(dev, flags));
}

cudaError_t cudaGetDeviceFlags(unsigned int* flags) {
  if (!flags) return ret(err::InvalidValue);
  bool active = false;
  return ret(core().contexts().primary_state(core().current_device(), flags, &active));
}

cudaError_t cudaInitDevice(int device, unsigned int deviceFlags, unsigned int flags) {
  if (flags & ~static_cast<unsigned>(cudaInitDeviceFlagsAreValid)) return ret(err::InvalidValue);
  if (core().check_device(device) != err::Success) return ret(err::InvalidDevice);
  if (flags & cudaInitDeviceFlagsAreValid)
    return ret(core().contexts().primary_set_flags(device, deviceFlags));
  return cudaSuccess;
}

cudaError_t cudaDeviceSetLimit(enum cudaLimit limit, size_t value) {
  uint64_t v = value;
  return config(Op::SetLimit, static_cast<uint32_t>(limit), &v);
}

cudaError_t cudaDeviceGetLimit(size_t* pValue, enum cudaLimit limit) {
  if (!pValue) return ret(err::InvalidValue);
  uint64_t v = 0;
  cudaError_t e = config(Op::GetLimit, static_cast<uint32_t>(limit), &v);
  if (e == cudaSuccess) *pValue = static_cast<size_t>(v);
  return e;
}

cudaError_t cudaDeviceSetCacheConfig(enum cudaFuncCache cacheConfig) {
  uint64_t v = static_cast<uint64_t>(cacheConfig);
  return config(Op::SetCacheConfig, 0, &v);
}

cudaError_t cudaDeviceGetCacheConfig(enum cudaFuncCache* pCacheConfig) {
  if (!pCacheConfig) return ret(err::InvalidValue);
  uint64_t v = 0;
  cudaError_t e = config(Op::GetCacheConfig, 0, &v);
  if (e == cudaSuccess) *pCacheConfig = static_cast<cudaFuncCache>(v);
  return e;
}

cudaError_t cudaDeviceSetSharedMemConfig(enum cudaSharedMemConfig config_) {
  uint64_t v = static_cast<uint64_t>(config_);
  return config(Op::SetSharedMemConfig, 0, &v);
}

cudaError_t cudaDeviceGetSharedMemConfig(enum cudaSharedMemConfig* pConfig) {
  if (!pConfig) return ret(err::InvalidValue);
  uint64_t v = 0;
  cudaError_t e = config(Op::GetSharedMemConfig, 0, &v);
  if (e == cudaSuccess) *pConfig = static_cast<cudaSharedMemConfig>(v);
  return e;
}

cudaError_t cudaCtxResetPersistingL2Cache(void) {
  return config(Op::ResetPersistingL2, 0, nullptr);
}

cudaError_t cudaProfilerStart(void) { return config(Op::ProfilerStart, 0, nullptr); }
cudaError_t cudaProfilerStop(void) { return config(Op::ProfilerStop, 0, nullptr); }

cudaError_t cudaDeviceGetPCIBusId(char* pciBusId, int len, int device) {
  if (!pciBusId || len <= 0) return ret(err::InvalidValue);
  const client::DeviceInfo* info = nullptr;
  if (CudaError e = core().device_info(device, &info); e != err::Success) return ret(e);
  snprintf(pciBusId, static_cast<size_t>(len), "%04x:%02x:%02x.0",
           static_cast<unsigned>(info->attr(kPciDomain)),
           static_cast<unsigned>(info->attr(kPciBus)),
           static_cast<unsigned>(info->attr(kPciDevice)));
  return cudaSuccess;
}

cudaError_t cudaDeviceGetByPCIBusId(int* device, const char* pciBusId) {
  if (!device || !pciBusId) return ret(err::InvalidValue);
  unsigned domain = 0, bus = 0, dev = 0;
  if (!parse_pci(pciBusId, &domain, &bus, &dev)) return ret(err::InvalidValue);
  for (int d = 0; d < core().device_count(); ++d) {
    const client::DeviceInfo* info = nullptr;
    if (CudaError e = core().device_info(d, &info); e != err::Success) return ret(e);
    if (static_cast<unsigned>(info->attr(kPciDomain)) == domain &&
        static_cast<unsigned>(info->attr(kPciBus)) == bus &&
        static_cast<unsigned>(info->attr(kPciDevice)) == dev) {
      *device = d;  // the first virtual device on that GPU
      return cudaSuccess;
    }
  }
  return ret(err::InvalidDevice);
}

cudaError_t cudaDeviceGetP2PAttribute(int* value, enum cudaDeviceP2PAttr attr, int srcDevice,
                                      int dstDevice) {
  return ret(core().p2p_attribute(srcDevice, dstDevice, static_cast<uint32_t>(attr), value));
}

// The device that matches `prop` best: among devices whose compute capability is at least the
// one asked for (any, when it is 0), the one with the most multiprocessors; otherwise the
// device with the highest compute capability.
cudaError_t cudaChooseDevice(int* device, const struct cudaDeviceProp* prop) {
  if (!device || !prop) return ret(err::InvalidValue);
  const int n = core().device_count();
  if (n == 0) return ret(err::NoDevice);
  int best = -1, best_sms = -1, fallback = 0, fallback_cc = -1;
  for (int d = 0; d < n; ++d) {
    const client::DeviceInfo* info = nullptr;
    if (CudaError e = core().device_info(d, &info); e != err::Success) return ret(e);
    const int cc = info->attr(75) * 10 + info->attr(76), sms = info->attr(16);
    if (cc > fallback_cc) fallback = d, fallback_cc = cc;
    const bool fits = cc >= prop->major * 10 + prop->minor &&
                      (prop->totalGlobalMem == 0 || info->total_mem >= prop->totalGlobalMem);
    if (fits && sms > best_sms) best = d, best_sms = sms;
  }
  *device = best >= 0 ? best : fallback;
  return cudaSuccess;
}

// The list is checked; the calling thread, when it has no current device yet, starts on its first
// entry (rgpu initialises a device lazily, so there is no failed device to skip).
cudaError_t cudaSetValidDevices(int* device_arr, int len) {
  if (len < 0 || (len > 0 && !device_arr)) return ret(err::InvalidValue);
  std::vector<int> list;
  for (int i = 0; i < len; ++i) {
    if (core().check_device(device_arr[i]) != err::Success) return ret(err::InvalidDevice);
    for (int seen : list)
      if (seen == device_arr[i]) return ret(err::InvalidValue);  // listed twice
    list.push_back(device_arr[i]);
  }
  if (!list.empty() && !core().contexts().current())
    return ret(core().set_current_device(list.front()));
  return cudaSuccess;
}

}  // extern "C"
