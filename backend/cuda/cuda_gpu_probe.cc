// What rgpud's GPU probe (a throw-away child, server/daemon.cc) learns from CUDA about each device
// it can see: name, UUID, PCI location and ids, memory, compute capability and peers.  None of it
// needs a context; query links answer from it (backend/cuda/cuda_nvml.cc).
#include <cstring>
#include <string>

#include "backend/cuda/cuda_driver.h"
#include "backend/gpu_query.h"

namespace rgpu::backend {

bool probe_cuda_gpus(proto::NvmlProbeTable& out, std::string& error) {
  CudaDriver drv;
  if (!drv.load(error)) return false;
  int count = 0;
  if (CUresult r = drv.cuDeviceGetCount(&count); r != CUDA_SUCCESS) {
    error = "cuDeviceGetCount: " + drv.describe(r);
    return false;
  }
  std::vector<CUdevice> devs(static_cast<size_t>(count));
  for (int i = 0; i < count; ++i) {
    auto& g = out.gpus.emplace_back();
    CUdevice& d = devs[static_cast<size_t>(i)];
    char name[256] = {};
    CUuuid uuid{};
    size_t total = 0;
    CUresult r = drv.cuDeviceGet(&d, i);
    if (r == CUDA_SUCCESS) r = drv.cuDeviceGetName(name, sizeof name - 1, d);
    if (r == CUDA_SUCCESS) r = drv.cuDeviceGetUuid_v2(&uuid, d);
    if (r == CUDA_SUCCESS) r = drv.cuDeviceTotalMem_v2(&total, d);
    if (r != CUDA_SUCCESS) {
      error = "CUDA device " + std::to_string(i) + ": " + drv.describe(r);
      return false;
    }
    auto attr = [&](int a) {
      int v = 0;
      drv.cuDeviceGetAttribute(&v, static_cast<CUdevice_attribute>(a), d);
      return v;
    };
    g.have = proto::kNvmlIdentity;
    g.name = name;
    memcpy(g.uuid.data(), uuid.bytes, 16);
    g.total_memory = total;
    g.pci_bus = static_cast<uint32_t>(attr(33));            // PCI_BUS_ID
    g.pci_device = static_cast<uint32_t>(attr(34));         // PCI_DEVICE_ID
    g.pci_domain = static_cast<uint32_t>(attr(50));         // PCI_DOMAIN_ID
    g.cc_major = attr(75);                                  // COMPUTE_CAPABILITY_MAJOR
    g.cc_minor = attr(76);                                  // COMPUTE_CAPABILITY_MINOR
    g.pci_device_id = static_cast<uint32_t>(attr(139));     // GPU_PCI_DEVICE_ID
    g.pci_subsystem_id = static_cast<uint32_t>(attr(140));  // GPU_PCI_SUBSYSTEM_ID
  }
  for (int i = 0; i < count; ++i) {
    auto& g = out.gpus[static_cast<size_t>(i)];
    g.have |= proto::kNvmlPeers;
    for (int p = 0; p < count; ++p) {
      int can = 0;
      if (p != i &&
          drv.cuDeviceCanAccessPeer(&can, devs[static_cast<size_t>(i)],
                                    devs[static_cast<size_t>(p)]) == CUDA_SUCCESS &&
          can)
        g.peers.push_back(static_cast<uint32_t>(p));
    }
  }
  return true;
}

}  // namespace rgpu::backend
