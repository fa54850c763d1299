// rgpud: the rgpu daemon.  See `rgpud --help`.
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "common/log.h"
#include "common/strings.h"
#include "proto/messages.h"
#include "server/daemon.h"
#include "server/decompressions.h"

namespace {

void usage(FILE* out) {
  fprintf(
      out,
      "usage: rgpud [options]\n"
      "  --listen HOST:PORT    address to listen on (default 127.0.0.1:%u); :PORT is\n"
      "                        127.0.0.1:PORT, port 0 any free port\n"
      "  --backend KIND        cuda | host | auto (default auto: cuda when a GPU is usable)\n"
      "  --token-file FILE     require clients to prove this token (RGPU_TOKEN); mandatory\n"
      "                        when listening on anything but loopback; mode 0600\n"
      "  --peer-key-file FILE  the secret rgpuds share for copies between them, never given\n"
      "                        to clients (default ~/.config/rgpud/peer-key, made at the first\n"
      "                        start: rgpuds of one user on one machine share it); mode 0600\n"
      "  --tls-cert FILE       TCP clients must use TLS 1.3; this server's certificate\n"
      "                        chain (PEM); needs --tls-key FILE (its private key)\n"
      "  --tls-client-ca FILE  mutual TLS: clients need a certificate signed by a CA in\n"
      "                        FILE; counts as authentication for listening beyond loopback\n"
      "  --host-capacity SIZE  host backend: device memory per GPU (default 8GiB)\n"
      "  --host-gpus N         host backend: GPUs to present (default 1)\n"
      "  --gpus LIST           cuda backend: serve only these GPUs of the machine, numbered as\n"
      "                        nvidia-smi numbers them or by UUID (e.g. 0,2 or GPU-...)\n"
      "  --port-file FILE      write the bound port to FILE once listening (for --listen :0)\n"
      "  --host-kernels SO     host backend: plugin with host implementations of kernels\n"
      "                        (a test double; see backend/host/host_kernel_api.h)\n"
      "  --chunk-size SIZE     bulk copies: bytes per pipelined chunk (default 2MiB)\n"
      "  --pipeline-depth N    bulk copies: device-to-host chunks in flight (default 8)\n"
      "  --module-cache DIR    where fat binaries are kept by hash (default\n"
      "                        ~/.cache/rgpud/modules; none to disable)\n"
      "Limits:\n"
      "  --max-handshakes N    connections still in their handshake, for network and for\n"
      "                        this machine's (shared-memory) clients each; more are dropped\n"
      "                        at once, or the source holding the most gives one up (default 32)\n"
      "  --max-handshakes-per-user N  of those, per source: TCP address (IPv6: per /64) or\n"
      "                        local uid (default 8; 0: no limit but the total)\n"
      "  --handshake-timeout S seconds a connection has to complete its handshake\n"
      "                        (default 5; may be fractional)\n"
      "  --max-sessions N      authenticated sessions at once (default 256)\n"
      "  --max-sessions-per-user N  sessions per user: per uid for shared-memory clients,\n"
      "                        per IP address for TCP clients (default 0: no limit)\n"
      "  --client-mem-limit SIZE  device memory one session may hold (default: no limit)\n"
      "  --mem-limit-per-user SIZE  device memory one user's sessions may hold together\n"
      "                        (default: no limit)\n"
      "  --client-max-streams N   streams one session may have (default 1024; 0: no limit)\n"
      "  --client-max-events N    events one session may have (default 65536; 0: no limit)\n"
      "  --client-max-ipc-exports N  CUDA IPC handles (memory and events) rgpud keeps for one\n"
      "                        session at once, an open descriptor each (default 256; 0: no\n"
      "                        limit but rgpud's descriptor budget, see the README)\n"
      "  --max-ipc-exports-per-user N  CUDA IPC handles rgpud keeps for one user's sessions\n"
      "                        together (default 0: no limit but the two above)\n"
      "  --max-image-mb N      a module image may decompress to max(N MiB, 64x its size)\n"
      "                        (capped at 1 GiB beyond N; default 64)\n"
      "  --max-decompressions N  module images decompressed at once, all sessions\n"
      "                        together (default 4)\n"
      "  --max-decompressions-per-user N  of those, decompressed for one user's sessions\n"
      "                        (default 2; 0: no limit but the total)\n"
      "  --decompression-wait S  seconds a module load waits for its turn to decompress\n"
      "                        before it fails (default 30)\n"
      "  --shutdown-timeout S  on SIGTERM/SIGINT, seconds sessions get to end before SIGKILL\n"
      "                        (default 5)\n"
      "  --client-timeout S    a client that stalls in the middle of a message, or stops\n"
      "                        reading what it asked for, loses its session after S seconds\n"
      "                        (default 30; an idle client is never timed out)\n"
      "  --drain-limit S       once a client is gone, its GPU work gets S seconds to finish;\n"
      "                        work that does not (a kernel that never ends, a stream waiting\n"
      "                        on a value nobody will write) ends the session process, and the\n"
      "                        driver frees what it held (default 10)\n"
      "  --module-cache-max-mb N  size cap of the module cache in MiB; least recently used\n"
      "                        modules are evicted (default 1024)\n"
      "  --version             print the version\n"
      "Environment: RGPU_LOG=error|warn|notice|info|debug (default notice)\n",
      rgpu::kDefaultPort);
}

// A whole number in [lo, hi], or exit 2 naming the option.
int count_option(const std::string& name, const std::string& v, int lo, int hi) {
  char* end = nullptr;
  long n = strtol(v.c_str(), &end, 10);
  if (v.empty() || *end || n < lo || n > hi) {
    fprintf(stderr, "rgpud: %s must be a whole number in %d..%d (got '%s')\n", name.c_str(), lo, hi,
            v.c_str());
    exit(2);
  }
  return static_cast<int>(n);
}

// Seconds (fractions allowed) in (0, 3600], as milliseconds; or exit 2 naming the option.
int seconds_option(const std::string& name, const std::string& v) {
  char* end = nullptr;
  double s = strtod(v.c_str(), &end);
  if (v.empty() || *end || !(s > 0) || s > 3600) {
    fprintf(stderr, "rgpud: %s must be seconds in (0, 3600] (got '%s')\n", name.c_str(), v.c_str());
    exit(2);
  }
  return std::max(1, static_cast<int>(s * 1000));
}

}  // namespace

int main(int argc, char** argv) {
  rgpu::log::init("rgpud", rgpu::log::Level::Notice);
  rgpu::server::DaemonConfig cfg;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) {
        fprintf(stderr, "rgpud: %s needs a value\n", a.c_str());
        exit(2);
      }
      return argv[++i];
    };
    if (a == "--help" || a == "-h") {
      usage(stdout);
      return 0;
    } else if (a == "--version") {
      printf("rgpud %s (protocol %u)\n", RGPU_VERSION, rgpu::proto::kProtocolVersion);
      return 0;
    } else if (a == "--listen") {
      std::string v = value();
      if (!v.empty() && v[0] == ':') v = "127.0.0.1" + v;  // ":PORT" (":0": any free port)
      auto hp = rgpu::parse_host_port(v);
      if (!hp) {
        fprintf(stderr, "rgpud: bad --listen address (want HOST:PORT)\n");
        return 2;
      }
      cfg.listen_host = hp->host;
      cfg.listen_port = hp->port;
    } else if (a == "--backend") {
      std::string b = value();
      if (b == "cuda")
        cfg.backend = rgpu::server::BackendKind::Cuda;
      else if (b == "host")
        cfg.backend = rgpu::server::BackendKind::Host;
      else if (b == "auto")
        cfg.backend = rgpu::server::BackendKind::Auto;
      else {
        fprintf(stderr, "rgpud: --backend must be cuda, host or auto\n");
        return 2;
      }
    } else if (a == "--token-file") {
      cfg.token_file = value();
    } else if (a == "--peer-key-file") {
      cfg.peer_key_file = value();
    } else if (a == "--tls-cert") {
      cfg.tls.cert_file = value();
    } else if (a == "--tls-key") {
      cfg.tls.key_file = value();
    } else if (a == "--tls-client-ca") {
      cfg.tls.client_ca_file = value();
    } else if (a == "--host-capacity") {
      auto s = rgpu::parse_size(value());
      if (!s || *s == 0) {
        fprintf(stderr, "rgpud: bad --host-capacity (e.g. 512MiB, 8GiB)\n");
        return 2;
      }
      cfg.host_capacity = *s;
    } else if (a == "--host-gpus") {
      cfg.host_gpus = atoi(value().c_str());
      if (cfg.host_gpus < 1 || cfg.host_gpus > 64) {
        fprintf(stderr, "rgpud: --host-gpus must be 1..64\n");
        return 2;
      }
    } else if (a == "--gpus") {
      std::string why;
      cfg.gpus = value();
      if (!rgpu::server::valid_gpu_list(cfg.gpus, why)) {
        fprintf(stderr, "rgpud: bad --gpus %s: %s\n", cfg.gpus.c_str(), why.c_str());
        return 2;
      }
    } else if (a == "--port-file") {
      cfg.port_file = value();
    } else if (a == "--chunk-size") {
      auto s = rgpu::parse_size(value());
      if (!s || *s < 4096 || *s > (1ull << 30)) {
        fprintf(stderr, "rgpud: --chunk-size must be 4KiB..1GiB\n");
        return 2;
      }
      cfg.chunk_bytes = *s;
    } else if (a == "--pipeline-depth") {
      int n = atoi(value().c_str());
      if (n < 1 || n > 1024) {
        fprintf(stderr, "rgpud: --pipeline-depth must be 1..1024\n");
        return 2;
      }
      cfg.pipeline_depth = static_cast<size_t>(n);
    } else if (a == "--max-handshakes") {
      cfg.max_handshakes = count_option(a, value(), 1, 100000);
    } else if (a == "--max-handshakes-per-user") {
      cfg.max_handshakes_per_user = count_option(a, value(), 0, 100000);
    } else if (a == "--handshake-timeout") {
      cfg.handshake_timeout_ms = seconds_option(a, value());
    } else if (a == "--max-sessions") {
      cfg.max_sessions = count_option(a, value(), 1, 1000000);
    } else if (a == "--max-sessions-per-user") {
      cfg.max_sessions_per_user = count_option(a, value(), 0, 1000000);
    } else if (a == "--client-mem-limit") {
      auto s = rgpu::parse_size(value());
      if (!s) {
        fprintf(stderr, "rgpud: bad --client-mem-limit (e.g. 512MiB, 8GiB; 0 for no limit)\n");
        return 2;
      }
      cfg.client_mem_limit = *s;
    } else if (a == "--mem-limit-per-user") {
      auto s = rgpu::parse_size(value());
      if (!s) {
        fprintf(stderr, "rgpud: bad --mem-limit-per-user (e.g. 512MiB, 8GiB; 0 for no limit)\n");
        return 2;
      }
      cfg.mem_limit_per_user = *s;
    } else if (a == "--max-image-mb") {
      cfg.max_image_mb = static_cast<uint64_t>(count_option(a, value(), 1, 1 << 20));
    } else if (a == "--max-decompressions") {
      cfg.max_decompressions =
          count_option(a, value(), 1, rgpu::server::DecompressionSlots::kMaxSlots);
    } else if (a == "--max-decompressions-per-user") {
      cfg.max_decompressions_per_user =
          count_option(a, value(), 0, rgpu::server::DecompressionSlots::kMaxSlots);
    } else if (a == "--decompression-wait") {
      cfg.decompression_wait_ms = seconds_option(a, value());
    } else if (a == "--client-max-streams") {
      cfg.client_max_streams = static_cast<size_t>(count_option(a, value(), 0, 1 << 30));
    } else if (a == "--client-max-events") {
      cfg.client_max_events = static_cast<size_t>(count_option(a, value(), 0, 1 << 30));
    } else if (a == "--client-max-ipc-exports") {
      cfg.client_max_ipc_exports = static_cast<size_t>(count_option(a, value(), 0, 1 << 30));
    } else if (a == "--max-ipc-exports-per-user") {
      cfg.max_ipc_exports_per_user = static_cast<size_t>(count_option(a, value(), 0, 1 << 30));
    } else if (a == "--shutdown-timeout") {
      cfg.shutdown_timeout_ms = seconds_option(a, value());
    } else if (a == "--host-kernels") {
      cfg.host_kernels = value();
    } else if (a == "--module-cache") {
      cfg.module_cache = value();
    } else if (a == "--client-timeout") {
      int s = atoi(value().c_str());
      if (s < 1 || s > 86400) {
        fprintf(stderr, "rgpud: --client-timeout must be 1..86400 seconds\n");
        return 2;
      }
      cfg.client_timeout_s = s;
    } else if (a == "--drain-limit") {
      int s = atoi(value().c_str());
      if (s < 1 || s > 86400) {
        fprintf(stderr, "rgpud: --drain-limit must be 1..86400 seconds\n");
        return 2;
      }
      cfg.drain_limit_s = s;
    } else if (a == "--module-cache-max-mb") {
      std::string v = value();
      char* end = nullptr;
      unsigned long long n = strtoull(v.c_str(), &end, 10);
      if (v.empty() || *end || n < 1 || n > (1ull << 20)) {
        fprintf(stderr, "rgpud: --module-cache-max-mb must be 1..1048576\n");
        return 2;
      }
      cfg.module_cache_max_mb = n;
    } else {
      fprintf(stderr, "rgpud: unknown option %s\n", a.c_str());
      usage(stderr);
      return 2;
    }
  }
  return rgpu::server::run_daemon(cfg);
}
