// rgpud's main loop: listen, hand each client to its own process, reap them, enforce the handshake
// budget and the session limits, and end every session on SIGTERM/SIGINT.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "fatbin/fatbin.h"
#include "server/tls_gate.h"

namespace rgpu::server {

enum class BackendKind { Cuda, Host, Auto };

struct DaemonConfig {
  std::string listen_host = "127.0.0.1";
  uint16_t listen_port = 7766;
  BackendKind backend = BackendKind::Auto;
  std::optional<std::string> token_file;
  // The secret rgpuds share for copies between them (server/peer_vouch.h); none: the default
  // file of this user, made at the first start.
  std::optional<std::string> peer_key_file;
  uint64_t host_capacity = 8ull << 30;  // host backend: bytes of "device memory" per GPU
  int host_gpus = 1;                    // host backend: how many GPUs to present
  // cuda backend: the machine's GPUs this daemon serves, as nvidia-smi numbers them ("0,2") or by
  // UUID ("GPU-..."); empty: all of them. Several daemons can each serve their own.
  std::string gpus;
  std::string port_file;                // write the bound port here once listening
  std::string host_kernels;             // host backend: plugin of host kernel implementations
  std::string module_cache;             // fat binaries by hash; "" = default, "none" = off
  uint64_t module_cache_max_mb = 1024;  // size cap of the module cache (LRU eviction)
  size_t chunk_bytes = 0;               // bulk pipeline: bytes per chunk (0: SessionConfig's)
  size_t pipeline_depth = 0;  // bulk pipeline: device-to-host chunks in flight (0: default)
  TlsSettings tls;            // TLS for TCP clients (none when empty)
  // Budget of connections that have not authenticated yet, one for network connections and one
  // for this machine's (shared memory): beyond max_handshakes new ones are dropped at once (or the
  // source holding the most gives one up); one source (TCP address or IPv6 /64, local uid) holds
  // at most max_handshakes_per_user; a handshake not finished within handshake_timeout_ms is
  // ended.
  int max_handshakes = 32;
  int max_handshakes_per_user = 8;
  int handshake_timeout_ms = 5000;
  int max_sessions = 256;           // authenticated sessions at once
  int max_sessions_per_user = 0;    // per shm uid / TCP peer address (0: no limit but the total)
  uint64_t client_mem_limit = 0;    // device memory per session (0: none)
  uint64_t mem_limit_per_user = 0;  // device memory of one user's sessions together (0: none)
  // Module images: what one may decompress to, at least (the budget is max(this, 64x the
  // image), fatbin::decompression_budget), and how many are decompressed at once on this daemon,
  // all sessions together; a session waits at most decompression_wait_ms for its turn.
  uint64_t max_image_mb = fatbin::kDefaultImageFloor >> 20;
  int max_decompressions = 4;
  int max_decompressions_per_user = 2;  // of those, held by one user's sessions (0: no limit)
  int decompression_wait_ms = 30000;
  size_t client_max_streams = 1024;
  size_t client_max_events = 65536;
  // CUDA IPC exports (memory and event handles) rgpud keeps for one session at once, a descriptor
  // each (0: no limit but the daemon's descriptor budget).
  size_t client_max_ipc_exports = 256;
  size_t max_ipc_exports_per_user = 0;  // of all one user's sessions together (0: no limit)
  int shutdown_timeout_ms = 5000;       // SIGTERM to sessions, SIGKILL after this
  int client_timeout_s = 30;  // a client stalled mid-frame or not reading ends its session
  int drain_limit_s = 10;     // GPU work still running this long after its client left ends
                              // the session process (the driver frees what it held)
};

// Runs until SIGTERM/SIGINT.  Returns the process exit code.
int run_daemon(const DaemonConfig& config);

// Whether `list` is a --gpus value: comma-separated GPU numbers or UUIDs (GPU-.../MIG-...), no
// repeats; `why` says what is wrong.
bool valid_gpu_list(const std::string& list, std::string& why);

}  // namespace rgpu::server
