// The host backend's identity of its emulated devices (name, UUID, PCI location), shared by its
// executor (cudaGetDeviceProperties) and its GpuQuery (NVML answers), so both say the same.
#pragma once

#include "backend/executor.h"

namespace rgpu::backend {

class HostLedger;

// Fills name, uuid, total_mem and attrs of emulated device `dev` (ledger: its capacity).
void host_device_info(int dev, const HostLedger& ledger, DeviceInfo& out);

}  // namespace rgpu::backend
