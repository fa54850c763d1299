// Fences shared between two rgpuds on one machine (docs/architecture.md, "Server-to-server
// copies", direct copies).  The passive session keeps one page (a sealed memfd) that every active
// server linked to it maps through the link's unix socket (PeerFencePage).  The passive session
// writes it: `frees` counts the allocations it let go of (AllocationTable); per GPU of the
// session, `processed` is the last PeerFence its dispatcher handled.  Each link has a slot of its
// own: `reached[slot][gpu]` is the newest fence the GPU's legacy stream got to (the GPU stores
// it, Executor::gate_signal), stored for fences handled from `slot_from[slot]` on.  An active
// server whose copy names memory it mapped before, with no free since, then needs no round trip:
// its stream waits on the GPU for its slot's word and runs the DMA (PeerCopier::try_direct).
// A slot is its link's alone: the active side may open its words when the link fails without
// letting another link's copies run early.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "backend/executor.h"

namespace rgpu::server {

constexpr size_t kPeerFenceDevices = 64;  // GPUs of the passive session the page covers
constexpr size_t kPeerFenceSlots = 16;    // links per passive session (never reused)

struct PeerFencePage {
  uint32_t frees;
  uint32_t reserved;
  uint32_t processed[kPeerFenceDevices];
  uint32_t slot_from[kPeerFenceSlots];                   // 0: not signalled yet
  uint32_t reached[kPeerFenceSlots][kPeerFenceDevices];  // gate words (backend/gate.h)
};

// Whether fence `a` is at or after `b` (ids wrap like gate words).
inline bool peer_fence_passed(uint32_t a, uint32_t b) { return static_cast<int32_t>(a - b) >= 0; }

// One mapping of a fence page, page-locked for the GPUs of this process's session.
class PeerFenceMap {
 public:
  // A new page (the passive session's).  nullptr and `why` on failure.
  static std::unique_ptr<PeerFenceMap> create(backend::Executor& exec, std::string& why);
  // The page behind `fd` (taken: closed here); it must be sealed at its size.  nullptr and `why`
  // on failure.
  static std::unique_ptr<PeerFenceMap> attach(backend::Executor& exec, int fd, std::string& why);
  ~PeerFenceMap();
  PeerFenceMap(const PeerFenceMap&) = delete;
  PeerFenceMap& operator=(const PeerFenceMap&) = delete;

  PeerFencePage* page() const { return page_; }
  int fd() const { return fd_; }  // the passive's, to hand to links; -1 on the active side

 private:
  PeerFenceMap(backend::Executor& exec, PeerFencePage* page, int fd)
      : exec_(exec), page_(page), fd_(fd) {}
  static std::unique_ptr<PeerFenceMap> map(backend::Executor& exec, int fd, bool keep_fd,
                                           std::string& why);
  backend::Executor& exec_;
  PeerFencePage* page_;
  int fd_;
};

// Atomic access to a page's words (shared with another process).
uint32_t peer_fence_load(const uint32_t& word);
void peer_fence_store(uint32_t& word, uint32_t value);
void peer_fence_bump(uint32_t& word);

}  // namespace rgpu::server
