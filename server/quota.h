// The one account of what a session makes its GPUs hold, checked against rgpud's per-client limit
// (--client-mem-limit).  Every path that makes a GPU hold memory for the client charges it here
// first, with what holds it, and releases it when that goes: cudaMalloc (graph memory nodes are
// cudaMallocs too), memory pools (what they hold from the heap, cached blocks included),
// cuMemCreate, CUDA IPC imports (the mapping keeps the memory alive after its exporter is gone),
// CUDA arrays, and modules (their variables and their code, decompressed).  A device reset releases
// what that GPU held; the session's end releases everything with the process.
//
// A session of rgpud's also charges its user's account (server/user_accounts.h), which holds
// what all sessions of one user hold together against --mem-limit-per-user.
//
// The dispatcher charges; waiters may release (frees end there), so every access takes a lock.
#pragma once

#include <array>
#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <utility>

#include "backend/executor.h"
#include "server/user_accounts.h"

namespace rgpu::server {

enum class Hold : uint8_t {
  Malloc,
  Pool,
  Vmm,
  IpcImport,
  Array,
  ModuleGlobals,
  ModuleCode,
  kCount
};
const char* hold_name(Hold h);

class MemoryQuota {
 public:
  explicit MemoryQuota(uint64_t limit = 0, UserAccount user = {}) : limit_(limit), user_(user) {}

  uint64_t limit() const { return limit_; }  // 0: none
  // Charges `bytes` of GPU `dev` to `why`, or fails with `code` (cudaErrorMemoryAllocation,
  // which the driver API reads as CUDA_ERROR_OUT_OF_MEMORY) and a message that names
  // --client-mem-limit, `action` ("allocating 4096 bytes") and what the session already holds, or
  // --mem-limit-per-user and what the user's sessions hold.
  backend::Status charge(Hold why, uint32_t dev, uint64_t bytes, const std::string& action,
                         CudaError code = err::MemoryAllocation);
  // Whether `bytes` more would fit now.
  bool fits(uint64_t bytes) const;
  void release(Hold why, uint32_t dev, uint64_t bytes);
  // Everything `why` holds on GPU `dev` (a device reset).
  void release_all(Hold why, uint32_t dev);
  uint64_t held() const;
  uint64_t held(Hold why) const;

 private:
  std::string holdings() const;  // mu_ held: "12 MiB by cudaMalloc, 3 MiB by module code"
  mutable std::mutex mu_;
  // mu_ held: takes `bytes` off the user's account too.
  void give_back(uint64_t bytes);
  const uint64_t limit_;
  const UserAccount user_;
  uint64_t total_ = 0;
  std::map<std::pair<Hold, uint32_t>, uint64_t> held_;
};

}  // namespace rgpu::server
