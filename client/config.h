// Client configuration from the environment.
//   RGPU_SERVERS  "host[:port][/gpu],..."  each entry is one CUDA device, in order
//                 (default 127.0.0.1:7766, the local rgpud's first GPU)
//   RGPU_TOKEN    shared token for servers that require authentication
//   RGPU_TIMEOUT  seconds of silence from a server after which it is taken for gone (default 10,
//                 0: wait for ever); also bounds connecting and the handshake
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
  // Liveness (RGPU_TIMEOUT): the handshake must finish, and while a synchronous call waits
  // something (a reply, data, a heartbeat) must arrive from the server, within this many seconds;
  // otherwise the link fails with cudaErrorDevicesUnavailable.  0: no limit.
  int timeout_s = 10;
};

Config load_config();

}  // namespace rgpu::client
