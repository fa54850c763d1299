// The host backend's answers to NVML-style questions.  This is a TEST DOUBLE (CI has no GPU): the
// devices are the host backend's simulated ones, whose names, UUIDs, PCI ids and memory are those
// its executor reports; memory in use is what the shared ledger holds for every session;
// running processes are the session processes holding a slot of the ledger; utilization is 0
// (nothing runs on a GPU), and what a real GPU would measure (temperature, power,
// clocks, serial) is not supported, as NVML answers for what a board cannot tell.
#include "backend/host/host_nvml.h"

#include <algorithm>

#include "backend/gpu_query.h"
#include "backend/host/host_attributes.h"
#include "backend/host/host_ledger.h"

namespace rgpu::backend {

void host_device_info(int dev, const HostLedger& ledger, DeviceInfo& out) {
  out.name = "rgpu host backend (test double, no GPU)";
  for (int i = 0; i < 16; ++i) out.uuid[i] = static_cast<uint8_t>(0xA0 + i + dev);
  out.total_mem = ledger.capacity();
  out.attrs = host_device_attributes();
  out.attrs.push_back({33, dev + 1});  // distinct PCI bus ids per emulated device
}

namespace {

int32_t attr(const DeviceInfo& info, uint32_t which) {
  int32_t v = 0;  // the last entry wins, as the client's attribute lookup does
  for (const auto& [a, value] : info.attrs)
    if (a == which) v = value;
  return v;
}

class HostGpuQuery final : public GpuQuery {
 public:
  explicit HostGpuQuery(std::vector<HostLedger*> ledgers) : ledgers_(std::move(ledgers)) {}

  int device_count() const override { return static_cast<int>(ledgers_.size()); }

  void system(proto::NvmlSystemRep& out) override {
    out.gpu_count = static_cast<uint32_t>(ledgers_.size());
    out.cuda_driver_version = 13000;  // what the host executor reports
    // No NVIDIA driver and no NVML: the double has no versions to tell.
    out.driver_version.clear();
    out.nvml_version.clear();
  }

  Status device(int gpu, uint32_t want, proto::NvmlDeviceRep& out) override {
    if (gpu < 0 || gpu >= device_count())
      return Status::fail(err::InvalidDevice, "host backend: GPU " + std::to_string(gpu) +
                                                  " does not exist (the server has " +
                                                  std::to_string(device_count()) + ")");
    const HostLedger& l = *ledgers_[static_cast<size_t>(gpu)];
    DeviceInfo info;
    host_device_info(gpu, l, info);
    out.have = proto::kNvmlIdentity;
    out.name = info.name;
    std::copy(info.uuid, info.uuid + 16, out.uuid.begin());
    out.pci_domain = static_cast<uint32_t>(attr(info, 50));
    out.pci_bus = static_cast<uint32_t>(attr(info, 33));
    out.pci_device = static_cast<uint32_t>(attr(info, 34));
    out.pci_device_id = static_cast<uint32_t>(attr(info, 139));
    out.pci_subsystem_id = static_cast<uint32_t>(attr(info, 140));
    out.total_memory = info.total_mem;
    out.cc_major = attr(info, 75);
    out.cc_minor = attr(info, 76);
    const uint32_t can = proto::kNvmlMinor | proto::kNvmlMemory | proto::kNvmlUtil |
                         proto::kNvmlComputeMode | proto::kNvmlPeers | proto::kNvmlProcesses;
    out.have |= want & can;
    out.minor_number = static_cast<uint32_t>(gpu);
    const uint64_t used = std::min(l.used(), l.capacity());
    out.memory_used = used;
    out.memory_free = l.capacity() - used;
    out.util_gpu = out.util_memory = 0;
    out.compute_mode = 0;              // NVML_COMPUTEMODE_DEFAULT: any number of clients
    if (want & proto::kNvmlProcesses)  // the sessions holding a slot of this GPU's ledger
      for (const auto& [pid, bytes] : l.holders())
        out.processes.push_back({static_cast<uint32_t>(pid), bytes});
    if (want & proto::kNvmlPeers)  // the host backend lets every GPU access every other
      for (int p = 0; p < device_count(); ++p)
        if (p != gpu) out.peers.push_back(static_cast<uint32_t>(p));
    return Status::success();
  }

 private:
  std::vector<HostLedger*> ledgers_;
};

}  // namespace

std::unique_ptr<GpuQuery> make_host_gpu_query(std::vector<HostLedger*> ledgers) {
  return std::make_unique<HostGpuQuery>(std::move(ledgers));
}

}  // namespace rgpu::backend
