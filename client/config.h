// Client configuration from the environment.
//   RGPU_SERVERS  "host[:port][/gpu],..."  each entry is one CUDA device, in order
//                 (default 127.0.0.1:7766, the local rgpud's first GPU)
//   RGPU_TOKEN    shared token for servers that require authentication
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace rgpu::client {

struct DeviceSpec {
  std::string host;
  uint16_t port = 0;
  uint32_t gpu = 0;  // GPU index on that server
  std::string text;  // as written, for messages
};

// Parses RGPU_SERVERS syntax; malformed entries are reported in `errors` and skipped.
std::vector<DeviceSpec> parse_servers(const std::string& spec, std::vector<std::string>& errors);

struct Config {
  std::vector<DeviceSpec> devices;
  std::optional<std::string> token;
  // Host-to-device copies up to this size are eager: sent without waiting for a reply (the bytes
  // are taken at the call, as CUDA stages them); larger ones wait for the server
  // (RGPU_EAGER_BYTES).
  uint64_t eager_bytes = 256 << 10;
};

Config load_config();

}  // namespace rgpu::client
