#include "client/config.h"

#include <charconv>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "common/log.h"
#include "common/strings.h"

namespace rgpu::client {

std::vector<DeviceSpec> parse_servers(const std::string& spec, std::vector<std::string>& errors) {
  std::vector<DeviceSpec> out;
  for (std::string entry : split(spec, ',')) {
    size_t b = entry.find_first_not_of(" \t"), e = entry.find_last_not_of(" \t");
    if (b == std::string::npos) continue;
    entry = entry.substr(b, e - b + 1);
    DeviceSpec d;
    d.text = entry;
    std::string addr = entry;
    size_t slash = entry.rfind('/');
    if (slash != std::string::npos) {
      addr = entry.substr(0, slash);
      std::string gpu = entry.substr(slash + 1);
      unsigned v = 0;
      auto [p, ec] = std::from_chars(gpu.data(), gpu.data() + gpu.size(), v);
      if (gpu.empty() || ec != std::errc() || p != gpu.data() + gpu.size()) {
        errors.push_back("bad GPU index in RGPU_SERVERS entry '" + entry + "'");
        continue;
      }
      d.gpu = v;
    }
    auto hp = parse_host_port(addr);
    if (!hp) {
      errors.push_back("malformed RGPU_SERVERS entry '" + entry + "' (want host[:port][/gpu])");
      continue;
    }
    d.host = hp->host;
    d.port = hp->port;
    out.push_back(d);
  }
  return out;
}

std::optional<uint64_t> parse_va_base(const std::string& text, std::string& error) {
  std::string_view t = text;
  int radix = 10;
  if (t.size() > 2 && t[0] == '0' && (t[1] == 'x' || t[1] == 'X')) {
    t.remove_prefix(2);
    radix = 16;
  }
  uint64_t v = 0;
  auto [p, ec] = std::from_chars(t.data(), t.data() + t.size(), v, radix);
  if (t.empty() || ec != std::errc() || p != t.data() + t.size()) {
    error = "RGPU_VA_BASE=" + text + " is not an address (want e.g. 0x500000000000)";
    return std::nullopt;
  }
  if (v % (2ull << 20) || v < (4ull << 30) || v >= kWindowLimit) {
    error = "RGPU_VA_BASE=" + text +
            " must be a multiple of 2 MiB, at least 4 GiB and below 0x700000000000";
    return std::nullopt;
  }
  return v;
}

void assign_windows(std::vector<DeviceSpec>& devices, uint64_t base,
                    std::vector<std::string>& errors) {
  // Windows follow each other from `base`, stepping over the range where Linux loads
  // position-independent executables and starts their heap ([kPieLow, kPieHigh)): the client's
  // and the server's own program may lie there.
  std::vector<uint64_t> windows;
  for (uint64_t w = base; windows.size() < devices.size() && w + kWindowSize <= kWindowLimit;
       w += kWindowSize) {
    if (w < kPieHigh && w + kWindowSize > kPieLow) {
      w = kPieHigh - kWindowSize;
      continue;
    }
    windows.push_back(w);
  }
  if (windows.size() < devices.size()) {
    char buf[64];
    snprintf(buf, sizeof buf, "0x%llx", static_cast<unsigned long long>(base));
    errors.push_back("RGPU_SERVERS names " + std::to_string(devices.size()) +
                     " devices, but only " + std::to_string(windows.size()) +
                     " address windows of 1 TiB fit between " + buf +
                     " (RGPU_VA_BASE) and 0x700000000000; devices from '" +
                     devices[windows.size()].text + "' on are left out");
    devices.resize(windows.size());
  }
  for (size_t i = 0; i < devices.size(); ++i) {
    devices[i].window_base = windows[i];
    devices[i].window_size = kWindowSize;
  }
}

Config load_config() {
  Config c;
  const char* servers = getenv("RGPU_SERVERS");
  std::vector<std::string> errors;
  c.devices = parse_servers(servers ? servers : "127.0.0.1:7766", errors);
  for (auto& e : errors) LOG_ERROR("%s", e.c_str());
  if (c.devices.empty() && errors.empty())
    LOG_ERROR(
        "RGPU_SERVERS is set but names no server (want host[:port][/gpu],...); "
        "no devices");
  else if (c.devices.empty())
    LOG_ERROR("RGPU_SERVERS names no usable server; no devices");
  uint64_t va_base = kDefaultVaBase;
  if (const char* b = getenv("RGPU_VA_BASE"); b && *b) {
    std::string why;
    if (auto v = parse_va_base(b, why))
      va_base = *v;
    else
      LOG_ERROR("%s; using 0x%llx", why.c_str(), static_cast<unsigned long long>(va_base));
  }
  errors.clear();
  assign_windows(c.devices, va_base, errors);
  for (auto& e : errors) LOG_ERROR("%s", e.c_str());
  if (const char* t = getenv("RGPU_TOKEN"); t && *t) c.token = t;
  if (const char* e = getenv("RGPU_EAGER_BYTES"); e && *e) {
    if (auto v = parse_size(e))
      c.eager_bytes = *v;
    else
      LOG_ERROR("RGPU_EAGER_BYTES=%s is not a size; using %llu", e,
                static_cast<unsigned long long>(c.eager_bytes));
  }
  if (const char* e = getenv("RGPU_SMALL_ALLOC"); e && *e) {
    if (auto v = parse_size(e); v && *v <= (256 << 10))
      c.small_alloc_max = *v;
    else
      LOG_ERROR("RGPU_SMALL_ALLOC=%s is not a size up to 256K; using %llu", e,
                static_cast<unsigned long long>(c.small_alloc_max));
  }
  if (const char* e = getenv("RGPU_LOCAL_SYNC"); e && *e) c.local_sync = strcmp(e, "0") != 0;
  if (const char* e = getenv("RGPU_TIMEOUT"); e && *e) {
    int v = 0;
    auto [p, ec] = std::from_chars(e, e + strlen(e), v);
    if (ec == std::errc() && *p == '\0' && v >= 0 && v <= 86400)
      c.timeout_s = v;
    else
      LOG_ERROR("RGPU_TIMEOUT=%s is not a whole number of seconds (0..86400); using %d", e,
                c.timeout_s);
  }
  return c;
}

}  // namespace rgpu::client
