// Shared-memory segments (memfd) as both ends of the shm transport use them: the ring layout, and
// the rules a segment from the other process must satisfy before it is mapped.  Nothing in a
// segment is trusted: the other process can write any byte of it at any time, so a reader takes
// each value it needs once into a local and checks it before use.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <string>

namespace rgpu::transport {

constexpr uint32_t kShmMagic = 0x5247534d;  // "RGSM"
constexpr size_t kShmMinRing = 4096;
constexpr size_t kShmMaxRing = size_t{1} << 30;

// One direction.  head is advanced by the producer, tail by the consumer; data_seq / space_seq are
// futex words the waiting side sleeps on.  Each side keeps its own index in a local and only
// writes it here; the other side's index is read once per use and checked against the ring size.
struct alignas(64) ShmRing {
  std::atomic<uint64_t> head;
  char pad0[56];
  std::atomic<uint64_t> tail;
  char pad1[56];
  std::atomic<uint32_t> data_seq, space_seq;
  std::atomic<uint32_t> consumer_waiting, producer_waiting;
  std::atomic<uint32_t> closed;
  char pad2[44];
};

struct ShmSegment {
  uint32_t magic;
  uint32_t ring_bytes;
  char pad[56];
  ShmRing rings[2];  // [0]: client to server, [1]: server to client
  // followed by the two data areas
};

inline size_t shm_segment_size(size_t ring) { return sizeof(ShmSegment) + 2 * ring; }

// Creates an anonymous memfd of `size` bytes sealed against shrinking and growing, so that a
// process mapping it can never fault on it.  Returns the descriptor, or -1 with `why` set.
int shm_create_sealed(const char* name, size_t size, std::string& why);

// Checks a descriptor received from another process: a regular memfd of exactly `size` bytes
// (its size by fstat) that is sealed against shrinking.  False with `why` naming what was wrong.
bool shm_check_sealed(int fd, uint64_t size, std::string& why);

}  // namespace rgpu::transport
