// Initialisation, versions and devices: cuInit, cuDriverGetVersion, cuDevice* (name, UUID,
// memory, every attribute the server reported, PCI location).
#include <atomic>
#include <cstdio>
#include <cstring>

#include "frontend/cuda/api.h"

using namespace rgpu;
using rgpu::cuda_fe::core;
using rgpu::cuda_fe::to_driver;

namespace rgpu::cuda_fe {

namespace {
std::atomic<bool> g_initialized{false};
}

CUresult initialized() {
  return g_initialized.load(std::memory_order_acquire) ? CUDA_SUCCESS : CUDA_ERROR_NOT_INITIALIZED;
}

}  // namespace rgpu::cuda_fe

namespace {

// CUdevice_attribute numbers of a device's PCI location.
constexpr uint32_t kPciBus = 33, kPciDevice = 34, kPciDomain = 50;

CUresult info_of(CUdevice dev, const client::DeviceInfo** out) {
  if (CUresult r = cuda_fe::initialized(); r != CUDA_SUCCESS) return r;
  return to_driver(core().device_info(dev, out));
}

// "[domain:]bus:device[.function]" in hexadecimal.
bool parse_pci(const char* s, unsigned* domain, unsigned* bus, unsigned* device) {
  unsigned a = 0, b = 0, c = 0, f = 0;
  int n = 0;
  if (std::sscanf(s, "%x:%x:%x.%x%n", &a, &b, &c, &f, &n) == 4 && s[n] == '\0') {
  } else if (n = 0, std::sscanf(s, "%x:%x:%x%n", &a, &b, &c, &n) == 3 && s[n] == '\0') {
  } else if (n = 0, std::sscanf(s, "%x:%x.%x%n", &b, &c, &f, &n) == 3 && s[n] == '\0') {
    a = 0;
  } else if (n = 0, std::sscanf(s, "%x:%x%n", &b, &c, &n) == 2 && s[n] == '\0') {
    a = 0;
  } else {
    return false;
  }
  *domain = a, *bus = b, *device = c;
  return true;
}

}  // namespace

RGPU_CU CUresult cuInit(unsigned int Flags) {
  if (Flags != 0) return CUDA_ERROR_INVALID_VALUE;
  // Servers are reached at first use; cuInit only needs the configuration (RGPU_SERVERS).
  if (core().device_count() == 0) return CUDA_ERROR_NO_DEVICE;
  rgpu::cuda_fe::g_initialized.store(true, std::memory_order_release);
  return CUDA_SUCCESS;
}

RGPU_CU CUresult cuDriverGetVersion(int* driverVersion) {
  if (!driverVersion) return CUDA_ERROR_INVALID_VALUE;
  // CUDA 13's interface; a newer server's number when it has one.  Like NVIDIA's, this works
  // before cuInit and needs no GPU.
  int server = 0;
  if (core().device_count() > 0 && core().driver_version(0, &server) != err::Success) server = 0;
  *driverVersion = server >= 13000 ? server : 13000;
  return CUDA_SUCCESS;
}

RGPU_CU CUresult cuDeviceGetCount(int* count) {
  if (CUresult r = cuda_fe::initialized(); r != CUDA_SUCCESS) return r;
  if (!count) return CUDA_ERROR_INVALID_VALUE;
  *count = core().device_count();
  return CUDA_SUCCESS;
}

RGPU_CU CUresult cuDeviceGet(CUdevice* device, int ordinal) {
  if (CUresult r = cuda_fe::initialized(); r != CUDA_SUCCESS) return r;
  if (!device) return CUDA_ERROR_INVALID_VALUE;
  if (core().check_device(ordinal) != err::Success) return CUDA_ERROR_INVALID_DEVICE;
  *device = ordinal;
  return CUDA_SUCCESS;
}

RGPU_CU CUresult cuDeviceGetName(char* name, int len, CUdevice dev) {
  if (!name || len <= 0) return CUDA_ERROR_INVALID_VALUE;
  const client::DeviceInfo* info = nullptr;
  if (CUresult r = info_of(dev, &info); r != CUDA_SUCCESS) return r;
  std::snprintf(name, static_cast<size_t>(len), "%s", info->name.c_str());
  return CUDA_SUCCESS;
}

RGPU_CU CUresult cuDeviceGetUuid_v2(CUuuid* uuid, CUdevice dev) {
  if (!uuid) return CUDA_ERROR_INVALID_VALUE;
  const client::DeviceInfo* info = nullptr;
  if (CUresult r = info_of(dev, &info); r != CUDA_SUCCESS) return r;
  std::memcpy(uuid->bytes, info->uuid, 16);
  return CUDA_SUCCESS;
}

#undef cuDeviceGetUuid
// The first version answered the same bytes (it differed only for MIG instances).
RGPU_CU CUresult cuDeviceGetUuid(CUuuid* uuid, CUdevice dev) {
  return cuDeviceGetUuid_v2(uuid, dev);
}

RGPU_CU CUresult cuDeviceTotalMem_v2(size_t* bytes, CUdevice dev) {
  if (!bytes) return CUDA_ERROR_INVALID_VALUE;
  const client::DeviceInfo* info = nullptr;
  if (CUresult r = info_of(dev, &info); r != CUDA_SUCCESS) return r;
  *bytes = info->total_mem;
  return CUDA_SUCCESS;
}

RGPU_CU CUresult cuDeviceGetAttribute(int* pi, CUdevice_attribute attrib, CUdevice dev) {
  if (!pi) return CUDA_ERROR_INVALID_VALUE;
  const client::DeviceInfo* info = nullptr;
  if (CUresult r = info_of(dev, &info); r != CUDA_SUCCESS) return r;
  // The runtime's cudaDeviceAttr numbers are the driver's: the server sends every attribute its
  // driver answers, by number.
  auto it = info->attrs.find(static_cast<uint32_t>(attrib));
  if (it == info->attrs.end()) return CUDA_ERROR_INVALID_VALUE;
  *pi = it->second;
  return CUDA_SUCCESS;
}

RGPU_CU CUresult cuDeviceGetPCIBusId(char* pciBusId, int len, CUdevice dev) {
  if (!pciBusId || len <= 0) return CUDA_ERROR_INVALID_VALUE;
  const client::DeviceInfo* info = nullptr;
  if (CUresult r = info_of(dev, &info); r != CUDA_SUCCESS) return r;
  std::snprintf(pciBusId, static_cast<size_t>(len), "%08x:%02x:%02x.0",
                static_cast<unsigned>(info->attr(kPciDomain)),
                static_cast<unsigned>(info->attr(kPciBus)),
                static_cast<unsigned>(info->attr(kPciDevice)));
  return CUDA_SUCCESS;
}

RGPU_CU CUresult cuDeviceGetByPCIBusId(CUdevice* dev, const char* pciBusId) {
  if (CUresult r = cuda_fe::initialized(); r != CUDA_SUCCESS) return r;
  if (!dev || !pciBusId) return CUDA_ERROR_INVALID_VALUE;
  unsigned domain = 0, bus = 0, device = 0;
  if (!parse_pci(pciBusId, &domain, &bus, &device)) return CUDA_ERROR_INVALID_VALUE;
  for (int d = 0; d < core().device_count(); ++d) {
    const client::DeviceInfo* info = nullptr;
    if (CUresult r = info_of(d, &info); r != CUDA_SUCCESS) return r;
    if (static_cast<unsigned>(info->attr(kPciDomain)) == domain &&
        static_cast<unsigned>(info->attr(kPciBus)) == bus &&
        static_cast<unsigned>(info->attr(kPciDevice)) == device) {
      *dev = d;  // the first virtual device on that GPU
      return CUDA_SUCCESS;
    }
  }
  return CUDA_ERROR_INVALID_DEVICE;
}

RGPU_CU CUresult cuDeviceGetLuid(char*, unsigned int*, CUdevice dev) {
  // LUIDs exist on Windows only; NVIDIA's Linux driver refuses the query too.
  if (CUresult r = cuda_fe::initialized(); r != CUDA_SUCCESS) return r;
  if (core().check_device(dev) != err::Success) return CUDA_ERROR_INVALID_DEVICE;
  return CUDA_ERROR_NOT_SUPPORTED;
}

RGPU_CU CUresult cuDeviceCanAccessPeer(int* canAccessPeer, CUdevice dev, CUdevice peerDev) {
  if (CUresult r = cuda_fe::initialized(); r != CUDA_SUCCESS) return r;
  if (!canAccessPeer) return CUDA_ERROR_INVALID_VALUE;
  return to_driver(core().can_access_peer(canAccessPeer, dev, peerDev));
}

RGPU_CU CUresult cuDeviceGetP2PAttribute(int* value, CUdevice_P2PAttribute attrib, CUdevice src,
                                         CUdevice dst) {
  if (CUresult r = cuda_fe::initialized(); r != CUDA_SUCCESS) return r;
  if (!value) return CUDA_ERROR_INVALID_VALUE;
  return to_driver(core().p2p_attribute(src, dst, static_cast<uint32_t>(attrib), value));
}
