// Client configuration from the environment.
//   RGPU_SERVERS  "host[:port][/gpu],..."  each entry is one CUDA device, in order
//                 (default 127.0.0.1:7766, the local rgpud's first GPU)
//   RGPU_TOKEN    shared token for servers that require authentication
//   RGPU_TIMEOUT  seconds of silence from a server after which it is taken for gone (default 10,
//                 0: wait for ever); also bounds connecting and the handshake
//   RGPU_VA_BASE  where the address windows of the devices begin (default 0x500000000000): device
//                 i's allocations lie in the i-th TiB from there, skipping 0x550000000000 to
//                 0x570000000000 (where programs are loaded); windows end below 0x700000000000
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
  // The device's address window: its server places every allocation of this device inside.
  uint64_t window_base = 0;
  uint64_t window_size = 0;
};

constexpr uint64_t kDefaultVaBase = 0x500000000000ull;
constexpr uint64_t kWindowSize = 1ull << 40;          // 1 TiB per device
constexpr uint64_t kWindowLimit = 0x700000000000ull;  // windows end at or below this
// Where x86-64 Linux loads position-independent executables (and their heap starts), randomized:
// no window lies here.
constexpr uint64_t kPieLow = 0x550000000000ull;
constexpr uint64_t kPieHigh = 0x570000000000ull;

// Parses RGPU_VA_BASE (a hexadecimal or decimal address, a multiple of 2 MiB, at least 4 GiB);
// nullopt with `error` set otherwise.
std::optional<uint64_t> parse_va_base(const std::string& text, std::string& error);
// Gives devices their windows from `base`, in order, skipping [kPieLow, kPieHigh); devices whose
// window would end beyond kWindowLimit are dropped, with a message in `errors`.
void assign_windows(std::vector<DeviceSpec>& devices, uint64_t base,
                    std::vector<std::string>& errors);

// Parses RGPU_SERVERS syntax; malformed entries are reported in `errors` and skipped.
std::vector<DeviceSpec> parse_servers(const std::string& spec, std::vector<std::string>& errors);

struct Config {
  std::vector<DeviceSpec> devices;
  std::optional<std::string> token;
  // Host-to-device copies up to this size are eager: sent without waiting for a reply (the bytes
  // are taken at the call, as CUDA stages them); larger ones wait for the server
  // (RGPU_EAGER_BYTES).
  uint64_t eager_bytes = 256 << 10;
  // cudaMalloc/cuMemAlloc of at most this many bytes takes a chunk of a slab the server granted
  // (client/small_allocs.h): no round trip (RGPU_SMALL_ALLOC; 0: every allocation asks the server).
  uint64_t small_alloc_max = 64 << 10;
  // A stream synchronization or query answered on the client when nothing was sent since a
  // synchronous call found the stream idle (RGPU_LOCAL_SYNC=0: every one asks the server).
  bool local_sync = true;
  // Liveness (RGPU_TIMEOUT): the handshake must finish, and while a synchronous call waits
  // something (a reply, data, a heartbeat) must arrive from the server, within this many seconds;
  // otherwise the link fails with cudaErrorDevicesUnavailable.  0: no limit.
  int timeout_s = 10;
};

Config load_config();

}  // namespace rgpu::client
