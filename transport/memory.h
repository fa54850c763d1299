// Registrable memory: segments a transport can register for its peer (Connection::register_memory)
// and the peer's checked mapping of one (Connection::map_remote).  Shared memory registers
// descriptor-backed segments: an anonymous memfd sealed against shrinking and growing, which the
// peer maps; a transport without registration (tcp) says so and callers use ordinary memory.
#pragma once

#include <cstdint>
#include <string>

#include "transport/connection.h"

namespace rgpu::transport {

// A sealed memfd of `size` bytes mapped read-write here; `name` shows in /proc/<pid>/maps.  Throws
// TransportError naming the step that failed.
MemoryRegion allocate_region(const char* name, size_t size);
// Unmaps and closes what allocate_region made (either may already be gone: -1 / nullptr).
void free_region(MemoryRegion& r);

// Remote side of shared memory: checks the peer's descriptor (a memfd of exactly `size` bytes,
// sealed against shrinking, so that this process can never fault on it) and maps it; `fd` is
// closed either way.  Throws TransportError naming `key` and what was wrong.
RemoteMapping map_peer_segment(int fd, uint64_t key, uint64_t size);

}  // namespace rgpu::transport
