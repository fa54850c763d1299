#include "frontend/nvml/nvml_text.h"

#include <cctype>
#include <cstdio>
#include <cstring>
#include <vector>

namespace rgpu::nvml {

std::string uuid_text(const std::array<uint8_t, 16>& u) {
  char s[48];
  snprintf(s, sizeof s, "GPU-%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x",
           u[0], u[1], u[2], u[3], u[4], u[5], u[6], u[7], u[8], u[9], u[10], u[11], u[12], u[13],
           u[14], u[15]);
  return s;
}

std::string bus_id_text(const PciAddress& a) {
  char s[40];
  snprintf(s, sizeof s, "%08X:%02X:%02X.%X", a.domain, a.bus & 0xFF, a.device & 0xFF,
           a.function & 0xF);
  return s;
}

std::string bus_id_legacy_text(const PciAddress& a) {
  char s[40];
  snprintf(s, sizeof s, "%04X:%02X:%02X.%X", a.domain & 0xFFFF, a.bus & 0xFF, a.device & 0xFF,
           a.function & 0xF);
  return s;
}

namespace {

// A non-empty run of at most `max_digits` hex digits.
std::optional<uint32_t> hex(const std::string& s, size_t max_digits) {
  if (s.empty() || s.size() > max_digits) return std::nullopt;
  uint32_t v = 0;
  for (char c : s) {
    if (!isxdigit(static_cast<unsigned char>(c))) return std::nullopt;
    v = v * 16 + static_cast<uint32_t>(isdigit(static_cast<unsigned char>(c))
                                           ? c - '0'
                                           : tolower(static_cast<unsigned char>(c)) - 'a' + 10);
  }
  return v;
}

}  // namespace

std::optional<PciAddress> parse_bus_id(const std::string& text) {
  std::vector<std::string> parts;
  size_t start = 0;
  while (true) {
    size_t colon = text.find(':', start);
    parts.push_back(text.substr(start, colon == std::string::npos ? colon : colon - start));
    if (colon == std::string::npos) break;
    start = colon + 1;
  }
  if (parts.size() < 2 || parts.size() > 3) return std::nullopt;
  PciAddress a;
  std::string dev = parts.back();
  if (size_t dot = dev.find('.'); dot != std::string::npos) {
    auto f = hex(dev.substr(dot + 1), 1);
    if (!f || *f > 7) return std::nullopt;
    a.function = *f;
    dev = dev.substr(0, dot);
  }
  auto d = hex(dev, 2);
  auto b = hex(parts[parts.size() - 2], 2);
  if (!d || !b || *d > 0x1F) return std::nullopt;
  a.device = *d;
  a.bus = *b;
  if (parts.size() == 3) {
    auto dom = hex(parts[0], 8);
    if (!dom) return std::nullopt;
    a.domain = *dom;
  }
  return a;
}

bool copy_out(const std::string& s, char* buf, unsigned length) {
  if (!buf || s.size() + 1 > length) return false;
  memcpy(buf, s.c_str(), s.size() + 1);
  return true;
}

}  // namespace rgpu::nvml
