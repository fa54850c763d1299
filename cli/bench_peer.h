// rgpu bench --peer: cross-server copy bandwidth and latency against the raw link between the two
// servers and against relaying through the client (cli/bench_peer.cc).
#pragma once

#include <cstdint>
#include <string>

namespace rgpu::cli {

// Devices 0 and 1 of RGPU_SERVERS (two servers); `worker` is rgpu-bench-worker.  0 when the relay
// (and the raw link, where measurable) worked, whether or not the peer copy is supported.
int bench_peer(const std::string& worker, const char* lib_dir, uint64_t max_bytes,
               const std::string& json);

}  // namespace rgpu::cli
