// Small parsing helpers shared by the daemon, the client and the CLI.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace rgpu {

constexpr uint16_t kDefaultPort = 7766;

std::vector<std::string> split(std::string_view s, char sep);

// "4096", "64K", "256MiB", "8G" → bytes.
std::optional<uint64_t> parse_size(std::string_view s);

struct HostPort {
  std::string host;
  uint16_t port = kDefaultPort;
};
// "host", "host:port", "[v6]:port".  Empty host is an error.
std::optional<HostPort> parse_host_port(std::string_view s, uint16_t default_port = kDefaultPort);

// True for 127.0.0.0/8, ::1 and "localhost".
bool is_loopback_name(std::string_view host);

}  // namespace rgpu
