#include "common/strings.h"

#include <cctype>
#include <charconv>

namespace rgpu {

std::vector<std::string> split(std::string_view s, char sep) {
  std::vector<std::string> out;
  size_t start = 0;
  while (start <= s.size()) {
    size_t end = s.find(sep, start);
    if (end == std::string_view::npos) end = s.size();
    out.emplace_back(s.substr(start, end - start));
    start = end + 1;
  }
  return out;
}

std::optional<uint64_t> parse_size(std::string_view s) {
  uint64_t value = 0;
  auto [ptr, ec] = std::from_chars(s.data(), s.data() + s.size(), value);
  if (ec != std::errc() || ptr == s.data()) return std::nullopt;
  std::string unit(ptr, s.data() + s.size());
  for (auto& c : unit) c = static_cast<char>(tolower(static_cast<unsigned char>(c)));
  uint64_t mul = 1;
  if (unit.empty() || unit == "b")
    mul = 1;
  else if (unit == "k" || unit == "kib" || unit == "kb")
    mul = 1ull << 10;
  else if (unit == "m" || unit == "mib" || unit == "mb")
    mul = 1ull << 20;
  else if (unit == "g" || unit == "gib" || unit == "gb")
    mul = 1ull << 30;
  else if (unit == "t" || unit == "tib" || unit == "tb")
    mul = 1ull << 40;
  else
    return std::nullopt;
  if (value > UINT64_MAX / mul) return std::nullopt;
  return value * mul;
}

std::optional<HostPort> parse_host_port(std::string_view s, uint16_t default_port) {
  HostPort hp;
  hp.port = default_port;
  std::string_view host = s, port;
  if (!s.empty() && s[0] == '[') {
    size_t close = s.find(']');
    if (close == std::string_view::npos) return std::nullopt;
    host = s.substr(1, close - 1);
    std::string_view rest = s.substr(close + 1);
    if (!rest.empty()) {
      if (rest[0] != ':') return std::nullopt;
      port = rest.substr(1);
    }
  } else {
    size_t colon = s.rfind(':');
    if (colon != std::string_view::npos && s.find(':') == colon) {
      host = s.substr(0, colon);
      port = s.substr(colon + 1);
    }
  }
  if (host.empty()) return std::nullopt;
  hp.host = std::string(host);
  if (!port.empty()) {
    unsigned v = 0;
    auto [ptr, ec] = std::from_chars(port.data(), port.data() + port.size(), v);
    if (ec != std::errc() || ptr != port.data() + port.size() || v > 65535) return std::nullopt;
    hp.port = static_cast<uint16_t>(v);
  }
  return hp;
}

bool is_loopback_name(std::string_view host) {
  return host == "localhost" || host == "::1" || host.rfind("127.", 0) == 0;
}

}  // namespace rgpu
