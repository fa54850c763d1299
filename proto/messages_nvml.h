// Messages of the nvml group (issue 13 item 2): what rgpu's libnvidia-ml.so.1 and `rgpu ls` ask a
// server about its GPUs.  The server answers from NVML on its own machine (or from what the daemon
// learnt from CUDA at start), never with a CUDA context.  Included from proto/messages.h; ids
// 0x1000-0x103F (proto/catalogue.def).
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "proto/wire.h"

namespace rgpu::proto {

// ---- nvml
// HelloReq::purpose: what a link is for.  A Queries link gets no executor on the server (no CUDA
// context, no ledger slot, no page-locked pool): it is served NvmlSystem, NvmlDevice and Ping only.
// PeerLink: another rgpud copying to or from this one (proto/messages_peer.h).
enum class LinkPurpose : uint32_t { Session = 0, Queries = 1, PeerLink = 2 };

// What a server tells about itself and its NVML.
struct NvmlSystemReq {
  RGPU_NO_FIELDS
};
struct NvmlSystemRep {
  uint32_t gpu_count = 0;
  int32_t cuda_driver_version = 0;  // as cuDriverGetVersion: 13000 for 13.0
  std::string driver_version;       // the NVIDIA driver's ("580.65.06"); empty when unknown
  std::string nvml_version;         // the server's NVML ("13.580.65.06"); empty when unknown
  RGPU_FIELDS(gpu_count, cuda_driver_version, driver_version, nvml_version)
};

// Groups of NvmlDeviceReq::want and NvmlDeviceRep::have: `have` says which fields the server
// could read (a field it cannot read is NVML_ERROR_NOT_SUPPORTED on the client, never invented).
enum NvmlField : uint32_t {
  kNvmlIdentity = 1u << 0,      // name, uuid, pci_*, total_memory, cc_*: always for a valid GPU
  kNvmlSerial = 1u << 1,        // serial
  kNvmlMinor = 1u << 2,         // minor_number (/dev/nvidiaN)
  kNvmlBrand = 1u << 3,         // brand (nvmlBrandType_t)
  kNvmlMemory = 1u << 4,        // memory_free, memory_used (total: total_memory)
  kNvmlReserved = 1u << 5,      // memory_reserved (nvmlMemory_v2_t)
  kNvmlUtil = 1u << 6,          // util_gpu, util_memory (percent)
  kNvmlTemp = 1u << 7,          // temperature (GPU core, degrees C)
  kNvmlPower = 1u << 8,         // power_mw
  kNvmlPowerLimit = 1u << 9,    // power_limit_mw (enforced)
  kNvmlPowerMgmt = 1u << 10,    // power_mgmt_limit_mw
  kNvmlClocks = 1u << 11,       // clocks / max_clocks (kNvmlNoClock where unknown)
  kNvmlComputeMode = 1u << 12,  // compute_mode (nvmlComputeMode_t)
  kNvmlProcesses = 1u << 13,    // processes
  kNvmlPeers = 1u << 14,        // peers
};
constexpr uint32_t kNvmlNoClock = 0xFFFFFFFFu;
constexpr size_t kNvmlClockKinds = 4;  // nvmlClockType_t: graphics, SM, memory, video

struct NvmlProcess {
  uint32_t pid = 0;
  uint64_t used_memory = 0;  // bytes; UINT64_MAX when the server's NVML cannot tell
  RGPU_FIELDS(pid, used_memory)
};

struct NvmlDeviceReq {
  uint32_t gpu = 0;   // the server's GPU number (RGPU_SERVERS' /N)
  uint32_t want = 0;  // NvmlField bits
  RGPU_FIELDS(gpu, want)
};
struct NvmlDeviceRep {
  uint32_t have = 0;  // NvmlField bits answered
  std::string name;
  std::array<uint8_t, 16> uuid{};
  uint32_t pci_domain = 0;
  uint32_t pci_bus = 0;
  uint32_t pci_device = 0;
  uint32_t pci_device_id = 0;     // (device << 16) | vendor, as NVML's pciDeviceId
  uint32_t pci_subsystem_id = 0;  // as NVML's pciSubSystemId
  uint64_t total_memory = 0;
  int32_t cc_major = 0;
  int32_t cc_minor = 0;
  uint32_t minor_number = 0;
  uint32_t brand = 0;
  std::string serial;
  uint64_t memory_free = 0;
  uint64_t memory_used = 0;
  uint64_t memory_reserved = 0;
  uint32_t util_gpu = 0;
  uint32_t util_memory = 0;
  uint32_t temperature = 0;
  uint32_t power_mw = 0;
  uint32_t power_limit_mw = 0;
  uint32_t power_mgmt_limit_mw = 0;
  std::vector<uint32_t> clocks;      // kNvmlClockKinds current clocks (MHz)
  std::vector<uint32_t> max_clocks;  // kNvmlClockKinds maximum clocks (MHz)
  uint32_t compute_mode = 0;
  std::vector<NvmlProcess> processes;  // compute processes on this GPU the server can see
  std::vector<uint32_t> peers;  // GPUs of this server this one can access (cuDeviceCanAccessPeer)
  RGPU_FIELDS(have, name, uuid, pci_domain, pci_bus, pci_device, pci_device_id, pci_subsystem_id,
              total_memory, cc_major, cc_minor, minor_number, brand, serial, memory_free,
              memory_used, memory_reserved, util_gpu, util_memory, temperature, power_mw,
              power_limit_mw, power_mgmt_limit_mw, clocks, max_clocks, compute_mode, processes,
              peers)
};

// What rgpud's GPU probe (a throw-away child at start) learnt from CUDA without a context: the
// identity of each CUDA device (as rgpud --gpus makes them visible) and which peers it can access.
// Query links answer from it, matched with the server's NVML by UUID.
struct NvmlProbeTable {
  std::vector<NvmlDeviceRep> gpus;
  RGPU_FIELDS(gpus)
};

}  // namespace rgpu::proto
