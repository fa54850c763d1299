#include "client/config.h"

#include <charconv>
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
  if (const char* t = getenv("RGPU_TOKEN"); t && *t) c.token = t;
  if (const char* e = getenv("RGPU_EAGER_BYTES"); e && *e) {
    if (auto v = parse_size(e))
      c.eager_bytes = *v;
    else
      LOG_ERROR("RGPU_EAGER_BYTES=%s is not a size; using %llu", e,
                static_cast<unsigned long long>(c.eager_bytes));
  }
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
