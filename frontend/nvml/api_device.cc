// NVML's device calls, answered by the servers of RGPU_SERVERS (frontend/nvml/nvml_state.h).  What
// a server cannot read is NVML_ERROR_NOT_SUPPORTED, as NVML answers for what a board cannot tell.
#include <algorithm>
#include <cctype>
#include <cstring>
#include <string>

#include "frontend/nvml/nvml_state.h"
#include "frontend/nvml/nvml_text.h"

using namespace rgpu;
using namespace rgpu::nvml;

namespace {

nvmlReturn_t device_of(nvmlDevice_t h, Device** d) { return State::get().from_handle(h, d); }

// Asks `h`'s server for `want` and hands the answer to `fill` when every group asked for came.
template <class F>
nvmlReturn_t answer(nvmlDevice_t h, uint32_t want, F&& fill) {
  Device* d = nullptr;
  if (nvmlReturn_t r = device_of(h, &d); r != NVML_SUCCESS) return r;
  proto::NvmlDeviceRep rep;
  if (nvmlReturn_t r = State::get().ask(*d, want, rep); r != NVML_SUCCESS) return r;
  if ((rep.have & want) != want) return NVML_ERROR_NOT_SUPPORTED;
  return fill(rep);
}

// Hands `h`'s identity (asked once per nvmlInit) to `fill`.
template <class F>
nvmlReturn_t with_identity(nvmlDevice_t h, F&& fill) {
  Device* d = nullptr;
  if (nvmlReturn_t r = device_of(h, &d); r != NVML_SUCCESS) return r;
  const proto::NvmlDeviceRep* id = nullptr;
  if (nvmlReturn_t r = State::get().identity(*d, &id); r != NVML_SUCCESS) return r;
  return fill(*d, *id);
}

PciAddress pci_of(const proto::NvmlDeviceRep& id) {
  return PciAddress{id.pci_domain, id.pci_bus, id.pci_device, 0};
}

// The first device whose identity satisfies `match`; NOT_FOUND when none does and every server
// answered, else the first failure (a server that is gone may hold the device asked for).
template <class M>
nvmlReturn_t find_device(nvmlDevice_t* out, M&& match) {
  unsigned n = 0;
  if (nvmlReturn_t r = State::get().count(&n); r != NVML_SUCCESS) return r;
  nvmlReturn_t failed = NVML_SUCCESS;
  for (unsigned i = 0; i < n; ++i) {
    Device* d = nullptr;
    if (State::get().by_index(i, &d) != NVML_SUCCESS) continue;
    const proto::NvmlDeviceRep* id = nullptr;
    nvmlReturn_t r = State::get().identity(*d, &id);
    if (r != NVML_SUCCESS) {
      if (failed == NVML_SUCCESS) failed = r;
      continue;
    }
    if (match(*id)) {
      *out = reinterpret_cast<nvmlDevice_t>(d);
      return NVML_SUCCESS;
    }
  }
  return failed == NVML_SUCCESS ? NVML_ERROR_NOT_FOUND : failed;
}

std::string lower(std::string s) {
  for (char& c : s) c = static_cast<char>(tolower(static_cast<unsigned char>(c)));
  return s;
}

template <class Info>
nvmlReturn_t processes(nvmlDevice_t h, unsigned* count, Info* infos) {
  if (!count) return NVML_ERROR_INVALID_ARGUMENT;
  return answer(h, proto::kNvmlProcesses, [&](const proto::NvmlDeviceRep& rep) {
    const unsigned n = static_cast<unsigned>(rep.processes.size());
    if (!infos || *count < n) {
      const bool fits = n == 0;
      *count = n;
      return fits ? NVML_SUCCESS : NVML_ERROR_INSUFFICIENT_SIZE;
    }
    for (unsigned i = 0; i < n; ++i) {
      Info info{};
      info.pid = rep.processes[i].pid;
      info.usedGpuMemory = rep.processes[i].used_memory;
      if constexpr (sizeof(Info) == sizeof(nvmlProcessInfo_t)) {
        info.gpuInstanceId = 0xFFFFFFFFu;  // not a MIG device
        info.computeInstanceId = 0xFFFFFFFFu;
      }
      infos[i] = info;
    }
    *count = n;
    return NVML_SUCCESS;
  });
}

nvmlReturn_t clock(nvmlDevice_t h, nvmlClockType_t type, unsigned* mhz, bool max) {
  if (!mhz || static_cast<unsigned>(type) >= proto::kNvmlClockKinds)
    return NVML_ERROR_INVALID_ARGUMENT;
  return answer(h, proto::kNvmlClocks, [&](const proto::NvmlDeviceRep& rep) {
    const auto& v = max ? rep.max_clocks : rep.clocks;
    const size_t k = static_cast<size_t>(type);
    if (k >= v.size() || v[k] == proto::kNvmlNoClock) return NVML_ERROR_NOT_SUPPORTED;
    *mhz = v[k];
    return NVML_SUCCESS;
  });
}

nvmlReturn_t power_value(nvmlDevice_t h, uint32_t field, unsigned* mw) {
  if (!mw) return NVML_ERROR_INVALID_ARGUMENT;
  return answer(h, field, [&](const proto::NvmlDeviceRep& rep) {
    *mw = field == proto::kNvmlPower        ? rep.power_mw
          : field == proto::kNvmlPowerLimit ? rep.power_limit_mw
                                            : rep.power_mgmt_limit_mw;
    return NVML_SUCCESS;
  });
}

}  // namespace

// ---- enumeration
RGPU_NVML_API nvmlReturn_t nvmlDeviceGetCount_v2(unsigned int* count) {
  return State::get().count(count);
}
RGPU_NVML_API nvmlReturn_t nvmlDeviceGetCount(unsigned int* count) {
  return State::get().count(count);
}

RGPU_NVML_API nvmlReturn_t nvmlDeviceGetHandleByIndex_v2(unsigned int index, nvmlDevice_t* device) {
  if (!device) return NVML_ERROR_INVALID_ARGUMENT;
  Device* d = nullptr;
  nvmlReturn_t r = State::get().by_index(index, &d);
  if (r == NVML_SUCCESS) *device = reinterpret_cast<nvmlDevice_t>(d);
  return r;
}
RGPU_NVML_API nvmlReturn_t nvmlDeviceGetHandleByIndex(unsigned int index, nvmlDevice_t* device) {
  return nvmlDeviceGetHandleByIndex_v2(index, device);
}

RGPU_NVML_API nvmlReturn_t nvmlDeviceGetHandleByUUID(const char* uuid, nvmlDevice_t* device) {
  if (!uuid || !device) return NVML_ERROR_INVALID_ARGUMENT;
  const std::string want = lower(uuid);
  return find_device(
      device, [&](const proto::NvmlDeviceRep& id) { return lower(uuid_text(id.uuid)) == want; });
}

RGPU_NVML_API nvmlReturn_t nvmlDeviceGetHandleByPciBusId_v2(const char* bus_id,
                                                            nvmlDevice_t* device) {
  if (!bus_id || !device) return NVML_ERROR_INVALID_ARGUMENT;
  auto want = parse_bus_id(bus_id);
  if (!want) return NVML_ERROR_INVALID_ARGUMENT;
  return find_device(device, [&](const proto::NvmlDeviceRep& id) { return pci_of(id) == *want; });
}
RGPU_NVML_API nvmlReturn_t nvmlDeviceGetHandleByPciBusId(const char* bus_id, nvmlDevice_t* device) {
  return nvmlDeviceGetHandleByPciBusId_v2(bus_id, device);
}

RGPU_NVML_API nvmlReturn_t nvmlDeviceGetIndex(nvmlDevice_t h, unsigned int* index) {
  if (!index) return NVML_ERROR_INVALID_ARGUMENT;
  Device* d = nullptr;
  nvmlReturn_t r = device_of(h, &d);
  if (r == NVML_SUCCESS) *index = d->index;
  return r;
}

// ---- identity
RGPU_NVML_API nvmlReturn_t nvmlDeviceGetName(nvmlDevice_t h, char* name, unsigned int length) {
  if (!name) return NVML_ERROR_INVALID_ARGUMENT;
  return with_identity(h, [&](Device&, const proto::NvmlDeviceRep& id) {
    return copy_out(id.name, name, length) ? NVML_SUCCESS : NVML_ERROR_INSUFFICIENT_SIZE;
  });
}

RGPU_NVML_API nvmlReturn_t nvmlDeviceGetUUID(nvmlDevice_t h, char* uuid, unsigned int length) {
  if (!uuid) return NVML_ERROR_INVALID_ARGUMENT;
  return with_identity(h, [&](Device&, const proto::NvmlDeviceRep& id) {
    return copy_out(uuid_text(id.uuid), uuid, length) ? NVML_SUCCESS : NVML_ERROR_INSUFFICIENT_SIZE;
  });
}

RGPU_NVML_API nvmlReturn_t nvmlDeviceGetPciInfo_v3(nvmlDevice_t h, nvmlPciInfo_t* pci) {
  if (!pci) return NVML_ERROR_INVALID_ARGUMENT;
  return with_identity(h, [&](Device&, const proto::NvmlDeviceRep& id) {
    nvmlPciInfo_t p{};
    const PciAddress a = pci_of(id);
    copy_out(bus_id_legacy_text(a), p.busIdLegacy, sizeof p.busIdLegacy);
    copy_out(bus_id_text(a), p.busId, sizeof p.busId);
    p.domain = a.domain;
    p.bus = a.bus;
    p.device = a.device;
    p.pciDeviceId = id.pci_device_id;
    p.pciSubSystemId = id.pci_subsystem_id;
    *pci = p;
    return NVML_SUCCESS;
  });
}
RGPU_NVML_API nvmlReturn_t nvmlDeviceGetPciInfo_v2(nvmlDevice_t h, nvmlPciInfo_t* pci) {
  return nvmlDeviceGetPciInfo_v3(h, pci);
}
RGPU_NVML_API nvmlReturn_t nvmlDeviceGetPciInfo(nvmlDevice_t h, nvmlPciInfo_v1_t* pci) {
  if (!pci) return NVML_ERROR_INVALID_ARGUMENT;
  nvmlPciInfo_t p{};
  if (nvmlReturn_t r = nvmlDeviceGetPciInfo_v3(h, &p); r != NVML_SUCCESS) return r;
  nvmlPciInfo_v1_t o{};
  memcpy(o.busId, p.busIdLegacy, sizeof o.busId);
  o.domain = p.domain;
  o.bus = p.bus;
  o.device = p.device;
  o.pciDeviceId = p.pciDeviceId;
  o.pciSubSystemId = p.pciSubSystemId;
  *pci = o;
  return NVML_SUCCESS;
}

RGPU_NVML_API nvmlReturn_t nvmlDeviceGetCudaComputeCapability(nvmlDevice_t h, int* major,
                                                              int* minor) {
  if (!major || !minor) return NVML_ERROR_INVALID_ARGUMENT;
  return with_identity(h, [&](Device&, const proto::NvmlDeviceRep& id) {
    *major = id.cc_major;
    *minor = id.cc_minor;
    return NVML_SUCCESS;
  });
}

RGPU_NVML_API nvmlReturn_t nvmlDeviceGetMinorNumber(nvmlDevice_t h, unsigned int* minor) {
  if (!minor) return NVML_ERROR_INVALID_ARGUMENT;
  return answer(h, proto::kNvmlMinor, [&](const proto::NvmlDeviceRep& rep) {
    *minor = rep.minor_number;
    return NVML_SUCCESS;
  });
}

RGPU_NVML_API nvmlReturn_t nvmlDeviceGetBrand(nvmlDevice_t h, nvmlBrandType_t* brand) {
  if (!brand) return NVML_ERROR_INVALID_ARGUMENT;
  return answer(h, proto::kNvmlBrand, [&](const proto::NvmlDeviceRep& rep) {
    *brand = static_cast<nvmlBrandType_t>(rep.brand);
    return NVML_SUCCESS;
  });
}

RGPU_NVML_API nvmlReturn_t nvmlDeviceGetSerial(nvmlDevice_t h, char* serial, unsigned int length) {
  if (!serial) return NVML_ERROR_INVALID_ARGUMENT;
  return answer(h, proto::kNvmlSerial, [&](const proto::NvmlDeviceRep& rep) {
    return copy_out(rep.serial, serial, length) ? NVML_SUCCESS : NVML_ERROR_INSUFFICIENT_SIZE;
  });
}

// ---- state
RGPU_NVML_API nvmlReturn_t nvmlDeviceGetMemoryInfo(nvmlDevice_t h, nvmlMemory_t* memory) {
  if (!memory) return NVML_ERROR_INVALID_ARGUMENT;
  return answer(h, proto::kNvmlMemory, [&](const proto::NvmlDeviceRep& rep) {
    memory->total = rep.total_memory;
    memory->free = rep.memory_free;
    memory->used = rep.total_memory - std::min(rep.memory_free, rep.total_memory);
    return NVML_SUCCESS;
  });
}

RGPU_NVML_API nvmlReturn_t nvmlDeviceGetMemoryInfo_v2(nvmlDevice_t h, nvmlMemory_v2_t* memory) {
  if (!memory) return NVML_ERROR_INVALID_ARGUMENT;
  if (memory->version != nvmlMemory_v2) return NVML_ERROR_ARGUMENT_VERSION_MISMATCH;
  return answer(h, proto::kNvmlMemory, [&](const proto::NvmlDeviceRep& rep) {
    memory->total = rep.total_memory;
    memory->free = rep.memory_free;
    if (rep.have & proto::kNvmlReserved) {
      memory->reserved = rep.memory_reserved;
      memory->used = rep.memory_used;
    } else {
      memory->reserved = 0;
      memory->used = rep.total_memory - std::min(rep.memory_free, rep.total_memory);
    }
    return NVML_SUCCESS;
  });
}

RGPU_NVML_API nvmlReturn_t nvmlDeviceGetUtilizationRates(nvmlDevice_t h, nvmlUtilization_t* u) {
  if (!u) return NVML_ERROR_INVALID_ARGUMENT;
  return answer(h, proto::kNvmlUtil, [&](const proto::NvmlDeviceRep& rep) {
    u->gpu = rep.util_gpu;
    u->memory = rep.util_memory;
    return NVML_SUCCESS;
  });
}

RGPU_NVML_API nvmlReturn_t nvmlDeviceGetComputeMode(nvmlDevice_t h, nvmlComputeMode_t* mode) {
  if (!mode) return NVML_ERROR_INVALID_ARGUMENT;
  return answer(h, proto::kNvmlComputeMode, [&](const proto::NvmlDeviceRep& rep) {
    *mode = static_cast<nvmlComputeMode_t>(rep.compute_mode);
    return NVML_SUCCESS;
  });
}

RGPU_NVML_API nvmlReturn_t nvmlDeviceGetTemperature(nvmlDevice_t h, nvmlTemperatureSensors_t sensor,
                                                    unsigned int* temp) {
  if (!temp || sensor != NVML_TEMPERATURE_GPU) return NVML_ERROR_INVALID_ARGUMENT;
  return answer(h, proto::kNvmlTemp, [&](const proto::NvmlDeviceRep& rep) {
    *temp = rep.temperature;
    return NVML_SUCCESS;
  });
}

RGPU_NVML_API nvmlReturn_t nvmlDeviceGetPowerUsage(nvmlDevice_t h, unsigned int* mw) {
  return power_value(h, proto::kNvmlPower, mw);
}
RGPU_NVML_API nvmlReturn_t nvmlDeviceGetEnforcedPowerLimit(nvmlDevice_t h, unsigned int* mw) {
  return power_value(h, proto::kNvmlPowerLimit, mw);
}
RGPU_NVML_API nvmlReturn_t nvmlDeviceGetPowerManagementLimit(nvmlDevice_t h, unsigned int* mw) {
  return power_value(h, proto::kNvmlPowerMgmt, mw);
}

RGPU_NVML_API nvmlReturn_t nvmlDeviceGetClockInfo(nvmlDevice_t h, nvmlClockType_t type,
                                                  unsigned int* mhz) {
  return clock(h, type, mhz, false);
}
RGPU_NVML_API nvmlReturn_t nvmlDeviceGetMaxClockInfo(nvmlDevice_t h, nvmlClockType_t type,
                                                     unsigned int* mhz) {
  return clock(h, type, mhz, true);
}

RGPU_NVML_API nvmlReturn_t nvmlDeviceGetComputeRunningProcesses_v3(nvmlDevice_t h,
                                                                   unsigned int* count,
                                                                   nvmlProcessInfo_t* infos) {
  return processes(h, count, infos);
}
RGPU_NVML_API nvmlReturn_t nvmlDeviceGetComputeRunningProcesses_v2(nvmlDevice_t h,
                                                                   unsigned int* count,
                                                                   nvmlProcessInfo_t* infos) {
  return processes(h, count, infos);
}
RGPU_NVML_API nvmlReturn_t nvmlDeviceGetComputeRunningProcesses(nvmlDevice_t h, unsigned int* count,
                                                                nvmlProcessInfo_v1_t* infos) {
  return processes(h, count, infos);
}

// Peer access as cuDeviceCanAccessPeer says on the server both devices are on; devices of two
// servers have none (P2P_STATUS_NOT_SUPPORTED).  NVLink, PCI and atomics capabilities are not
// known to the server's probe: NOT_SUPPORTED rather than a guess.
RGPU_NVML_API nvmlReturn_t nvmlDeviceGetP2PStatus(nvmlDevice_t h1, nvmlDevice_t h2,
                                                  nvmlGpuP2PCapsIndex_t index,
                                                  nvmlGpuP2PStatus_t* status) {
  if (!status) return NVML_ERROR_INVALID_ARGUMENT;
  Device* a = nullptr;
  Device* b = nullptr;
  if (nvmlReturn_t r = device_of(h1, &a); r != NVML_SUCCESS) return r;
  if (nvmlReturn_t r = device_of(h2, &b); r != NVML_SUCCESS) return r;
  if (index != NVML_P2P_CAPS_INDEX_READ && index != NVML_P2P_CAPS_INDEX_WRITE)
    return NVML_ERROR_NOT_SUPPORTED;
  if (a->spec.host != b->spec.host || a->spec.port != b->spec.port) {
    *status = NVML_P2P_STATUS_NOT_SUPPORTED;  // two servers: no peer access between them
    return NVML_SUCCESS;
  }
  if (a->spec.gpu == b->spec.gpu) {  // two entries naming one GPU: its own memory
    *status = NVML_P2P_STATUS_OK;
    return NVML_SUCCESS;
  }
  const proto::NvmlDeviceRep* id = nullptr;
  if (nvmlReturn_t r = State::get().identity(*a, &id); r != NVML_SUCCESS) return r;
  if (!(id->have & proto::kNvmlPeers)) return NVML_ERROR_NOT_SUPPORTED;
  const bool can = std::find(id->peers.begin(), id->peers.end(), b->spec.gpu) != id->peers.end();
  *status = can ? NVML_P2P_STATUS_OK : NVML_P2P_STATUS_NOT_SUPPORTED;
  return NVML_SUCCESS;
}
