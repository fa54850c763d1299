// The host backend's part of the drvlibs group (a test double, no GPU): tensor map "descriptors"
// made deterministically from the arguments (only a real driver can encode a CUtensorMap; this one
// lets CI check that arguments arrive intact and errors come back), the occupancy answer with
// dynamic shared memory, and stream memory operations run in stream order on the emulated memory.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "backend/executor.h"

namespace rgpu::backend {

// The layout of the test double's descriptor, in 16 little-endian 64-bit words (tests decode it):
//   0 kHostTensorMapMagic, 1 global address,
//   2 kind | data type << 8 | rank << 16 | interleave << 24 | swizzle << 32 | L2 promotion << 40 |
//     OOB fill << 48 | im2col wide mode << 56,
//   3..7 global dimensions, 8..11 global strides,
//   12 box dimensions (tiled; 12 bits each, dimension i at bit 12i),
//   13 element strides (4 bits each at bit 4i) | channels per pixel << 20 | pixels per column <<
//   40, 14 im2col corners: lower i at bits 16i..16i+7, upper i at 16i+8..16i+15 (as int8), 15
//   FNV-1a of bytes 0..119 (checked by ReplaceAddress: anything else is not a tensor map).
constexpr uint64_t kHostTensorMapMagic = 0x50414d54'55504752ull;  // "RGPUTMAP"

Status host_tensor_map_encode(const Executor::TensorMapArgs& a, uint8_t (&map)[128]);
Status host_tensor_map_replace_address(uint8_t (&map)[128], uint64_t address);

// Blocks of `block_size` threads with `dynamic_smem` bytes each that fit one emulated SM (the
// function's static shared memory is none; its dynamic limit is 48 KiB, as kFuncAttrs says).
Status host_occupancy(int32_t block_size, uint64_t dynamic_smem, int32_t& blocks);

// Stream memory operations: the task a stream runs for them.  A wait polls its word (never
// holding a lock) until its condition holds or cancel() is called (the session ends).
class HostMemOps {
 public:
  HostMemOps() : stop_(std::make_shared<std::atomic<bool>>(false)) {}
  std::function<void()> task(std::vector<Executor::MemOp> ops) const;
  void cancel() { stop_->store(true); }

 private:
  std::shared_ptr<std::atomic<bool>> stop_;
};

// cuLink* for the test double: it cannot link device code, so a link of exactly one cubin, PTX
// text or fat binary gives that image back (a module loads from it as from the linker's cubin);
// anything else is refused at cuLinkComplete, naming why.  Safe for concurrent calls.
class HostLinks {
 public:
  Status create(uint64_t& link);
  Status add(uint64_t link, uint32_t type, const std::string& name, const uint8_t* data,
             size_t size);
  Status complete(uint64_t link, std::vector<uint8_t>& image);
  Status destroy(uint64_t link);

 private:
  struct Input {
    uint32_t type;
    std::string name;
    std::vector<uint8_t> data;
  };
  std::mutex mu_;
  std::map<uint64_t, std::vector<Input>> links_;
  uint64_t next_ = 1;
};

// True when a wait's condition (CUstreamWaitValue_flags, FLUSH bit aside) holds for `current`.
bool mem_wait_satisfied(uint64_t current, uint64_t value, uint32_t flags, bool wide);

}  // namespace rgpu::backend
