// The host backend's CUDA IPC: "device memory" is an anonymous mapping until it is exported; then
// its bytes move into a memfd mapped at the same address (MAP_FIXED replaces the mapping in one
// step), and that memfd is what travels to the importing session, which maps (MAP_SHARED) the
// pages holding the exported part in its own client's window.  Both sessions then see each
// other's writes, as two processes do with CUDA IPC on one GPU.
#pragma once

#include <cstdint>
#include <map>

#include "backend/executor.h"

namespace rgpu::backend {

class HostIpc {
 public:
  static constexpr uint32_t kKind = 0x484f5354;  // "HOST": a memfd holding the mapping's bytes

  ~HostIpc();
  // The mapping [base, base+size) of this process as a memfd: made shared at the first export
  // (the caller made sure no host kernel touches it meanwhile).  `fd` is a new descriptor.
  Status export_mapping(uint64_t base, uint64_t size, int& fd);
  bool shared(uint64_t base) const { return shared_.count(base) != 0; }
  // The mapping at `base` is going away (freed): its memfd, if any, is closed here (importers
  // keep theirs).
  void forget(uint64_t base);
  // Maps what of descriptor `fd` (kind `kind`, at least `span` bytes) holds [offset, offset +
  // size) into [addr, addr + span), which nothing of this process uses, at the same offsets: only
  // the pages of that range, so nothing else of the exporter's mapping is reachable here beyond
  // the pages' other bytes.
  Status import(int fd, uint32_t kind, uint64_t addr, uint64_t span, uint64_t offset,
                uint64_t size);
  // `span` as given to import.
  Status close_import(uint64_t addr, uint64_t span);
  void close_all_imports();

 private:
  struct Import {
    uint64_t span;     // reserved at the import's address
    uint64_t at, len;  // what is mapped
  };
  std::map<uint64_t, int> shared_;      // exported mappings: base -> memfd
  std::map<uint64_t, Import> imports_;  // imported mappings by address
};

}  // namespace rgpu::backend
