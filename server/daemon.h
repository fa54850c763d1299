// rgpud's main loop: listen, hand each client to its own process, reap them.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

namespace rgpu::server {

enum class BackendKind { Cuda, Host, Auto };

struct DaemonConfig {
  std::string listen_host = "127.0.0.1";
  uint16_t listen_port = 7766;
  BackendKind backend = BackendKind::Auto;
  std::optional<std::string> token_file;
  uint64_t host_capacity = 8ull << 30;  // host backend: bytes of "device memory" per GPU
  int host_gpus = 1;                    // host backend: how many GPUs to present
  std::string port_file;                // write the bound port here once listening
  std::string host_kernels;             // host backend: plugin of host kernel implementations
  std::string module_cache;             // fat binaries by hash; "" = default, "none" = off
  uint64_t module_cache_max_mb = 1024;  // size cap of the module cache (LRU eviction)
  size_t chunk_bytes = 0;               // bulk pipeline: bytes per chunk (0: SessionConfig's)
  size_t pipeline_depth = 0;  // bulk pipeline: device-to-host chunks in flight (0: default)
};

// Runs until SIGTERM/SIGINT.  Returns the process exit code.
int run_daemon(const DaemonConfig& config);

}  // namespace rgpu::server
