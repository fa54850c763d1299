// Per-request counts of what this process sent to its servers, for finding where an application's
// time goes (round trips per step, bytes per step): with RGPU_STATS set (not "0"), the counts are
// printed to stderr at exit, one line per request type: synchronous requests (each a round trip),
// asynchronous ones, and the payload bytes each way.  Off by default: then a request costs one
// relaxed load here.
#pragma once

#include <cstdint>

namespace rgpu::client {

// Notes one request of `type` (sync: its sender waits for the reply), with `out` payload bytes
// sent and `in` bytes that come back.
void note_request(uint16_t type, bool sync, uint64_t out, uint64_t in);

}  // namespace rgpu::client
