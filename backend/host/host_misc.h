// The host backend's part of the misc group: which GPU maps which peer (cudaDevice{Enable,
// Disable}PeerAccess), the atomic capabilities of this test double, and events shared between
// sessions (CUDA IPC event handles).  A shared event is a memfd page of two counters: `recorded`
// (bumped by every record, from either session) and `completed` (the highest record whose stream
// work is done).  Both sessions map it; waiting on it means waiting until `completed` reaches the
// `recorded` value read when the wait was asked for, as with CUDA's interprocess events.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <set>
#include <utility>
#include <vector>

#include "backend/executor.h"
#include "backend/host/host_streams.h"

namespace rgpu::backend {

// One shared event's page, mapped in this process (unmapped and closed with the last owner).
class SharedEvent {
 public:
  static constexpr uint32_t kKind = 0x45564e54;  // "EVNT": a memfd holding the two counters

  ~SharedEvent();
  // A new page (both counters 0), or the page of descriptor `fd` (duplicated; the caller keeps
  // `fd`).
  static Status create(std::shared_ptr<SharedEvent>& out);
  static Status open(int fd, std::shared_ptr<SharedEvent>& out);
  // A new descriptor of the page, the caller's to close.
  Status dup(int& fd) const;
  // Takes the next record number; done(n) marks record n complete (after its stream work).
  uint32_t next_record();
  void done(uint32_t n);
  // A fence that is signalled once every record taken so far is complete.
  FencePtr fence_now(const std::shared_ptr<SharedEvent>& self);

 private:
  struct Page {
    std::atomic<uint32_t> recorded;
    std::atomic<uint32_t> completed;
  };
  int fd_ = -1;
  Page* page_ = nullptr;
};

class HostMisc {
 public:
  Status enable_peer(int dev, int peer);
  Status disable_peer(int dev, int peer);
  void reset(int dev);  // cudaDeviceReset forgets the GPU's peer mappings
  static Status atomic_caps(int peer, const std::vector<uint32_t>& ops,
                            std::vector<uint32_t>& caps);

 private:
  std::mutex mu_;
  std::set<std::pair<int, int>> peers_;  // (dev, peer) with access enabled
};

}  // namespace rgpu::backend
