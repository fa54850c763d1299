// Small device allocations without a round trip (issue 29): cudaMalloc/cuMemAlloc of at most
// RGPU_SMALL_ALLOC bytes (default 64 KiB) takes a chunk of a slab the server granted earlier (one
// Malloc of kSlabBytes), as the driver itself sub-allocates small requests.  Chunks are powers of
// two from 512 bytes (cudaMalloc's alignment) up; a slab holds chunks of one size.
//
// A freed chunk is not handed out again at once: work queued before the free may still use it
// (CUDA's cudaFree waits for the GPU to be past that work).  It waits in quarantine, tagged with
// the device's current epoch.  When a class runs out of free chunks while some wait, the client
// closes the epoch with one SmallReclaim: the server marks the work issued so far (private
// events, or nothing when the device is idle) and answers, without waiting, how many epochs are
// complete (the GPU is past the work issued before they closed); the chunks of those epochs are
// free again.  If none is, a new slab is taken: an allocation never waits for the GPU (a kernel
// may be waiting for what the program does after it).  So a free costs no message at all, and an
// allocation costs a round trip only when its class has run out of free chunks.  A slab whose
// chunks are all free or quarantined goes back to the server (a Free, which the server itself
// orders after the work queued before it) when its class keeps a slab's worth of chunks in other
// slabs.
//
// IPC: a handle of a chunk names that chunk alone (IpcGetRangeHandle: the importer's requests may
// name nothing else), but its kernels reach the whole slab's mapping, as CUDA's own handles of
// sub-allocated memory reach their block.  So once a chunk is exported its slab hands out nothing
// again (what it holds then is the exporter's, as with CUDA), and it goes back when its last chunk
// is freed.
//
// This class is bookkeeping only (thread-safe, never calls out): the Client makes the calls
// (client/client.cc) and enters each chunk in its address map as an allocation of its own, so
// pointer attributes, address ranges and copies see the chunk, not the slab.
#pragma once

#include <cstdint>
#include <map>
#include <mutex>
#include <vector>

namespace rgpu::client {

class SmallAllocations {
 public:
  static constexpr uint64_t kSlabBytes = 2ull << 20;
  static constexpr uint64_t kMinChunk = 512;

  // `max_bytes`: the largest request served from slabs (0: none; at most kSlabBytes / 8).
  explicit SmallAllocations(uint64_t max_bytes);
  bool serves(uint64_t size) const { return size > 0 && size <= max_bytes_; }
  static uint64_t chunk_bytes(uint64_t size);  // the chunk size that serves `size`

  // A free chunk for `size` on `dev`, or 0.  With 0, *reclaimable says whether chunks of that
  // size wait in quarantine (a reclaim would free them).
  uint64_t take(int dev, uint64_t size, bool* reclaimable);
  // Adds a slab of kSlabBytes at `base` (from the server) for chunks of `size`'s class and takes
  // its first chunk; 0 (nothing added) when it overlaps a slab.
  uint64_t add_slab(int dev, uint64_t base, uint64_t size);
  // A reclaim of `dev`: begin_reclaim closes the current epoch and returns it (the server is
  // asked about it); finish_reclaim(complete) frees the chunks quarantined in epochs below
  // `complete` (the server's answer).
  uint64_t begin_reclaim(int dev);
  void finish_reclaim(int dev, uint64_t complete);
  // Puts chunk `ptr` in quarantine; false when `ptr` is no chunk handed out.  When its slab now
  // holds nothing in use and is not needed, the slab is dropped here and *slab_to_free names it
  // (the caller gives it back to the server); else *slab_to_free is 0.
  bool release(uint64_t ptr, uint64_t* slab_to_free, bool* exported = nullptr);
  // Chunk `ptr` gets an IPC handle: its slab hands out nothing again, and once freed the chunk is
  // not reused (release sets *exported, and the caller withdraws the handle).  False when `ptr`
  // is no chunk in use; *fresh: it was not marked before.  unmark_exported: a fresh export
  // failed (the slab stays retired).
  bool mark_exported(uint64_t ptr, bool* fresh = nullptr);
  void unmark_exported(uint64_t ptr);
  // Whether [p, p + n) overlaps a slab (a new slab or allocation from the server must not).
  bool overlaps(uint64_t p, uint64_t n) const;
  // The slab that holds chunk `ptr`: false when `ptr` lies in no slab.
  bool slab_of(uint64_t ptr, uint64_t* base) const;
  // cudaDeviceReset: the server freed the device's slabs.
  void forget_device(int dev);
  // The server refused a slab (a memory limit, or the GPU is full): until allow_slabs (memory
  // was freed), the device's small allocations go to the server without trying one first.
  void refuse_slabs(int dev);
  void allow_slabs(int dev);
  bool slabs_refused(int dev) const;

  struct Counts {
    uint64_t slabs = 0, in_use = 0, quarantined = 0, retired = 0;
  };
  Counts counts(int dev) const;  // for tests

 private:
  struct Slab {
    int device = 0;
    uint64_t chunk = 0;  // bytes
    uint32_t in_use = 0;
    bool retired = false;        // a chunk was exported: nothing more is handed out (see IPC above)
    std::vector<uint32_t> free;  // chunk indices
    std::vector<std::pair<uint32_t, uint64_t>> quarantine;  // index, epoch when freed
    std::vector<uint8_t> used;  // per chunk: 0 free, 1 handed out, 2 handed out and exported
  };
  // The slab holding chunk `ptr` and the chunk's index; null when `ptr` is no chunk's start.
  Slab* chunk_at(uint64_t ptr, uint64_t* base, uint32_t* index);
  uint32_t chunks_per(const Slab& s) const { return static_cast<uint32_t>(kSlabBytes / s.chunk); }
  // Chunks of class `chunk` on `dev` in slabs other than `except` that are free or quarantined.
  uint64_t spare(int dev, uint64_t chunk, uint64_t except) const;
  const uint64_t max_bytes_;
  mutable std::mutex mu_;
  std::map<uint64_t, Slab> slabs_;  // by base
  std::map<int, uint64_t> epoch_;   // per device: the current quarantine epoch
  std::map<int, bool> refused_;     // per device: refuse_slabs
};

}  // namespace rgpu::client
