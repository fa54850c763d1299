#include "backend/host/host_drvlibs.h"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <string>
#include <thread>

namespace rgpu::backend {
namespace {

constexpr uint32_t kWaitGeq = 0, kWaitEq = 1, kWaitAnd = 2, kWaitNor = 3;
constexpr uint32_t kWait32 = 1, kWrite32 = 2, kFlush = 3, kWait64 = 4, kWrite64 = 5, kBarrier = 6;

Status invalid(const std::string& m) { return Status::fail(err::InvalidValue, "tensor map: " + m); }

uint64_t fnv1a(const uint8_t* p, size_t n) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (size_t i = 0; i < n; ++i) h = (h ^ p[i]) * 0x100000001b3ull;
  return h;
}

void put(uint8_t (&map)[128], int word, uint64_t v) { std::memcpy(map + 8 * word, &v, 8); }
uint64_t get(const uint8_t (&map)[128], int word) {
  uint64_t v;
  std::memcpy(&v, map + 8 * word, 8);
  return v;
}

// What NVIDIA's driver documents beyond what the client checks (cuda.h, cuTensorMapEncodeTiled):
// dimensions, strides, box and element strides.
Status check(const Executor::TensorMapArgs& a) {
  const uint32_t min_rank = a.kind == 0 ? 1 : 3;
  if (a.rank < min_rank || a.rank > 5) return invalid("rank " + std::to_string(a.rank));
  if (a.dims.size() != a.rank || a.strides.size() != a.rank - 1 || a.elem_strides.size() != a.rank)
    return invalid("arrays do not match the rank");
  for (uint64_t d : a.dims)
    if (d == 0 || d > (1ull << 32)) return invalid("global dimension " + std::to_string(d));
  for (uint64_t s : a.strides)
    if (s % 16 || s >= (1ull << 40)) return invalid("global stride " + std::to_string(s));
  for (uint32_t e : a.elem_strides)
    if (e == 0 || e > 8) return invalid("element stride " + std::to_string(e));
  if (a.kind == 0) {
    if (a.box.size() != a.rank) return invalid("box dimensions do not match the rank");
    for (uint32_t b : a.box)
      if (b == 0 || b > 256) return invalid("box dimension " + std::to_string(b));
  } else {
    const size_t corners = a.kind == 1 ? a.rank - 2 : 1;
    if (a.lower.size() != corners || a.upper.size() != corners)
      return invalid("im2col corners do not match the rank");
    if (a.channels == 0 || a.channels > 256 || a.pixels == 0 || a.pixels > 1024)
      return invalid("channels per pixel or pixels per column out of range");
  }
  return Status::success();
}

}  // namespace

Status host_tensor_map_encode(const Executor::TensorMapArgs& a, uint8_t (&map)[128]) {
  if (Status s = check(a); !s.ok()) return s;
  std::memset(map, 0, 128);
  put(map, 0, kHostTensorMapMagic);
  put(map, 1, a.address);
  put(map, 2,
      uint64_t(a.kind) | uint64_t(a.data_type & 0xff) << 8 | uint64_t(a.rank) << 16 |
          uint64_t(a.interleave & 0xff) << 24 | uint64_t(a.swizzle & 0xff) << 32 |
          uint64_t(a.l2_promotion & 0xff) << 40 | uint64_t(a.oob_fill & 0xff) << 48 |
          uint64_t(a.mode & 0xff) << 56);
  for (size_t i = 0; i < a.dims.size(); ++i) put(map, 3 + static_cast<int>(i), a.dims[i]);
  for (size_t i = 0; i < a.strides.size(); ++i) put(map, 8 + static_cast<int>(i), a.strides[i]);
  uint64_t box = 0, elem = 0, corners = 0;
  for (size_t i = 0; i < a.box.size(); ++i) box |= uint64_t(a.box[i] & 0xfff) << (12 * i);
  for (size_t i = 0; i < a.elem_strides.size(); ++i)
    elem |= uint64_t(a.elem_strides[i] & 0xf) << (4 * i);
  elem |= uint64_t(a.channels & 0xfffff) << 20 | uint64_t(a.pixels & 0xfffff) << 40;
  for (size_t i = 0; i < a.lower.size() && i < 4; ++i)
    corners |= uint64_t(static_cast<uint8_t>(a.lower[i])) << (16 * i) |
               uint64_t(static_cast<uint8_t>(a.upper[i])) << (16 * i + 8);
  put(map, 12, box);
  put(map, 13, elem);
  put(map, 14, corners);
  put(map, 15, fnv1a(map, 120));
  return Status::success();
}

Status host_tensor_map_replace_address(uint8_t (&map)[128], uint64_t address) {
  if (get(map, 0) != kHostTensorMapMagic || get(map, 15) != fnv1a(map, 120))
    return invalid("not a tensor map this backend encoded (or it was changed)");
  if (address % 16) return invalid("the new global address is not 16-byte aligned");
  put(map, 1, address);
  put(map, 15, fnv1a(map, 120));
  return Status::success();
}

Status host_occupancy(int32_t block_size, uint64_t dynamic_smem, int32_t& blocks) {
  if (block_size <= 0) return Status::fail(err::InvalidValue, "block size must be positive");
  // Dynamic shared memory up to the device's opt-in maximum per block: the test double does not
  // track each function's cudaFuncAttributeMaxDynamicSharedMemorySize (cuFFT raises it, then asks).
  constexpr uint64_t kSmemPerSm = 233472, kFuncDynamicSmem = 232448;
  if (dynamic_smem > kFuncDynamicSmem) {
    blocks = 0;
    return Status::success();
  }
  int32_t n = std::min(32, 2048 / block_size);
  if (dynamic_smem) n = std::min<int32_t>(n, static_cast<int32_t>(kSmemPerSm / dynamic_smem));
  blocks = n;
  return Status::success();
}

bool mem_wait_satisfied(uint64_t current, uint64_t value, uint32_t flags, bool wide) {
  if (!wide) current &= 0xffffffffull, value &= 0xffffffffull;
  switch (flags & 0x3) {
    case kWaitGeq:
      return wide ? static_cast<int64_t>(current - value) >= 0
                  : static_cast<int32_t>(static_cast<uint32_t>(current - value)) >= 0;
    case kWaitEq:
      return current == value;
    case kWaitAnd:
      return (current & value) != 0;
    case kWaitNor:
    default: {
      const uint64_t nor = ~(current | value);
      return (wide ? nor : nor & 0xffffffffull) != 0;
    }
  }
}

std::function<void()> HostMemOps::task(std::vector<Executor::MemOp> ops) const {
  return [ops = std::move(ops), stop = stop_] {
    for (const Executor::MemOp& o : ops) {
      const bool wide = o.op == kWait64 || o.op == kWrite64;
      if (o.op == kWrite32 || o.op == kWrite64) {
        // The stream's earlier work is done (its worker runs in order); a release store is the
        // fence the driver puts before a write.
        if (wide)
          __atomic_store_n(reinterpret_cast<uint64_t*>(o.address), o.value, __ATOMIC_SEQ_CST);
        else
          __atomic_store_n(reinterpret_cast<uint32_t*>(o.address), static_cast<uint32_t>(o.value),
                           __ATOMIC_SEQ_CST);
      } else if (o.op == kWait32 || o.op == kWait64) {
        auto load = [&] {
          return wide ? __atomic_load_n(reinterpret_cast<const uint64_t*>(o.address),
                                        __ATOMIC_ACQUIRE)
                      : uint64_t(__atomic_load_n(reinterpret_cast<const uint32_t*>(o.address),
                                                 __ATOMIC_ACQUIRE));
        };
        // Polls like a GPU's front end: briefly at once, then backing off to 1 ms; only this
        // stream's worker waits.
        auto nap = std::chrono::microseconds(5);
        for (int spins = 0; !mem_wait_satisfied(load(), o.value, o.flags, wide); ++spins) {
          if (stop->load(std::memory_order_relaxed)) return;
          if (spins < 64) {
            std::this_thread::yield();
            continue;
          }
          std::this_thread::sleep_for(nap);
          nap = std::min(nap * 2, std::chrono::microseconds(1000));
        }
      } else if (o.op == kFlush || o.op == kBarrier) {
        __atomic_thread_fence(__ATOMIC_SEQ_CST);
      }
    }
  };
}

Status HostLinks::create(uint64_t& link) {
  std::lock_guard<std::mutex> lock(mu_);
  link = next_++;
  links_[link];
  return Status::success();
}

Status HostLinks::add(uint64_t link, uint32_t type, const std::string& name, const uint8_t* data,
                      size_t size) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = links_.find(link);
  if (it == links_.end()) return Status::fail(400, "no such link state");
  it->second.push_back({type, name, std::vector<uint8_t>(data, data + size)});
  return Status::success();
}

Status HostLinks::complete(uint64_t link, std::vector<uint8_t>& image) {
  constexpr uint32_t kCubin = 0, kPtx = 1, kFatbin = 2;
  std::lock_guard<std::mutex> lock(mu_);
  auto it = links_.find(link);
  if (it == links_.end()) return Status::fail(400, "no such link state");
  const auto& in = it->second;
  if (in.size() != 1 || (in[0].type != kCubin && in[0].type != kPtx && in[0].type != kFatbin))
    return Status::fail(err::NotSupported,
                        "the host backend (a test double) links exactly one cubin, PTX text or "
                        "fat binary; this link has " +
                            std::to_string(in.size()) + " input(s)");
  image = in[0].data;
  return Status::success();
}

Status HostLinks::destroy(uint64_t link) {
  std::lock_guard<std::mutex> lock(mu_);
  return links_.erase(link) ? Status::success() : Status::fail(400, "no such link state");
}

}  // namespace rgpu::backend
