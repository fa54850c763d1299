// The text forms NVML uses for a GPU's identity, and parsing them back (what
// nvmlDeviceGetHandleByUUID / ByPciBusId accept).
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>

namespace rgpu::nvml {

// "GPU-xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx" (lower-case hex), as NVML and nvidia-smi print it.
std::string uuid_text(const std::array<uint8_t, 16>& uuid);

struct PciAddress {
  uint32_t domain = 0;
  uint32_t bus = 0;
  uint32_t device = 0;
  uint32_t function = 0;
  bool operator==(const PciAddress&) const = default;
};
// nvmlPciInfo_t::busId: "dddddddd:bb:dd.f" (8 hex digits of domain, upper-case hex).
std::string bus_id_text(const PciAddress& a);
// nvmlPciInfo_t::busIdLegacy: "dddd:bb:dd.f".
std::string bus_id_legacy_text(const PciAddress& a);
// Parses "[domain:]bus:device[.function]" in hex, either width of domain, either case (what
// nvmlDeviceGetHandleByPciBusId accepts); nullopt when malformed or out of range.
std::optional<PciAddress> parse_bus_id(const std::string& text);

// Copies `s` into `buf` of `length` bytes with its terminating zero; false (nothing written) when
// it does not fit (NVML_ERROR_INSUFFICIENT_SIZE).
bool copy_out(const std::string& s, char* buf, unsigned length);

}  // namespace rgpu::nvml
