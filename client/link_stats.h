// Per-request counts of what this process sent to its servers, for finding where an application's
// time goes (round trips per step, bytes per step): with RGPU_STATS set (not "0"), the counts are
// printed to stderr at exit, one line per request type: synchronous requests (each a round trip),
// asynchronous ones, and the payload bytes each way; then what module images cost: images shipped
// (ModuleShip, ModuleLoad) and their bytes, image look-ups (ModuleHave, ModuleResolve,
// ModuleLookup: each a round trip) and the hashes they asked about, and the round trips in all;
// last, the calls answered on the client that would have been requests.
// Off by default: then a request costs one relaxed load here.
#pragma once

#include <cstdint>

namespace rgpu::client {

class LinkStats {
 public:
  // The instance of the library this is compiled into.  libcuda.so.1 and libcudart.so.13 each
  // link the client core; a ServerLink keeps the instance of the library that made it (the one
  // that made the Client), so that a process counts everything in one table.
  static LinkStats& of_this_library();
  // Notes one request of `type` (sync: its sender waits for the reply), with `out` payload bytes
  // sent and `in` bytes that come back.
  void note_request(uint16_t type, bool sync, uint64_t out, uint64_t in);
  // Notes one call that would have been request `type` but was answered on the client (a
  // synchronization of a stream known idle): printed as "answered here".
  void note_local(uint16_t type);
  // Notes `n` image hashes asked about in one look-up (ModuleHave, ModuleResolve).
  void note_hashes_asked(uint64_t n);
  struct Table;  // the counts (client/link_stats.cc)

 private:
  LinkStats();
  Table* const table_;  // null while RGPU_STATS is off
};

}  // namespace rgpu::client
