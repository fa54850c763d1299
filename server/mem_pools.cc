#include "server/mem_pools.h"

#include <algorithm>
#include <string>

namespace rgpu::server {

using backend::Status;

namespace {

Status invalid(std::string what) { return Status::fail(err::InvalidValue, std::move(what)); }

std::string pool_name(uint32_t dev, uint64_t id) {
  return id ? "memory pool " + std::to_string(id) + " of GPU " + std::to_string(dev)
            : "the default memory pool of GPU " + std::to_string(dev);
}

// A cached block serves a request when it is large enough and not much larger (so a small
// request does not pin a large block).
bool fits(uint64_t block, uint64_t size) {
  return block >= size && block - size <= std::max<uint64_t>(size, 2u << 20);
}

}  // namespace

MemPools::Pool* MemPools::find(uint32_t dev, uint64_t id, Status& s) {
  auto it = pools_.find({dev, id});
  if (it == pools_.end() && id == 0) {
    if (pools_.size() >= kMaxPools) {
      s = invalid("more than " + std::to_string(kMaxPools) + " memory pools");
      return nullptr;
    }
    it = pools_.emplace(Key{dev, 0}, Pool{}).first;
  }
  if (it == pools_.end() || it->second.destroyed) {
    s = invalid(pool_name(dev, id) + " does not exist (never created, or destroyed)");
    return nullptr;
  }
  return &it->second;
}

Status MemPools::create(uint32_t dev, uint64_t id, uint64_t window, uint64_t max_size) {
  if (id == 0) return invalid("memory pool id 0 names the default pool; a new pool needs another");
  if (pools_.count({dev, id})) return invalid(pool_name(dev, id) + " already exists");
  if (pools_.size() >= kMaxPools)
    return invalid("more than " + std::to_string(kMaxPools) + " memory pools");
  Pool p;
  p.window = window;
  p.max_size = max_size;
  pools_.emplace(Key{dev, id}, std::move(p));
  return Status::success();
}

Status MemPools::destroy(uint32_t dev, uint64_t id) {
  if (id == 0) return invalid("the default memory pool of a GPU cannot be destroyed");
  Status s;
  Pool* p = find(dev, id, s);
  if (!p) return s;
  p->destroyed = true;
  shrink(dev, *p, 0);
  drop_if_unused({dev, id});
  return Status::success();
}

bool MemPools::complete(uint32_t dev, Cached& c) {
  if (c.event == 0) return true;
  if (!ops_.done(dev, c.event)) return false;
  ops_.release(dev, c.event);
  c.event = 0;
  return true;
}

void MemPools::shrink(uint32_t dev, Pool& p, uint64_t keep) {
  for (size_t i = 0; i < p.cache.size();) {
    Cached& c = p.cache[i];
    // Blocks that may not be handed out again go whatever `keep` says.
    if ((p.reserved <= keep && reusable(dev, c)) || !complete(dev, c)) {
      ++i;
      continue;
    }
    ops_.heap_free(dev, c.ptr, c.size);
    p.reserved -= c.size;
    p.cache.erase(p.cache.begin() + static_cast<std::ptrdiff_t>(i));
  }
}

void MemPools::drop_if_unused(const Key& k) {
  auto it = pools_.find(k);
  if (it != pools_.end() && it->second.destroyed && it->second.live == 0 &&
      it->second.cache.empty())
    pools_.erase(it);
}

void MemPools::take(Pool& p, size_t index, uint64_t& ptr, uint64_t size, uint32_t dev) {
  Cached c = p.cache[index];
  p.cache.erase(p.cache.begin() + static_cast<std::ptrdiff_t>(index));
  if (c.event) ops_.release(dev, c.event);
  ptr = c.ptr;
  p.used += c.size;
  p.used_high = std::max(p.used_high, p.used);
  ++p.live;
  (void)size;
  live_[{dev, c.ptr}] = Live{0, size, c.size};
}

Status MemPools::alloc(uint32_t dev, uint64_t id, uint64_t window, uint64_t stream, uint64_t size,
                       uint64_t& ptr) {
  if (size == 0) return invalid("zero-byte pool allocation");
  Status s;
  Pool* p = find(dev, id, s);
  if (!p) return s;
  if (p->window == 0) p->window = window;
  // 1. A cached block this stream may use now: its own free, or one that completed.
  int best = -1;
  for (size_t i = 0; i < p->cache.size(); ++i) {
    Cached& c = p->cache[i];
    if (!fits(c.size, size) || !reusable(dev, c)) continue;
    if (c.stream != stream && !(p->opportunistic && complete(dev, c))) continue;
    if (best < 0 || c.size < p->cache[static_cast<size_t>(best)].size) best = static_cast<int>(i);
  }
  if (best >= 0) {
    take(*p, static_cast<size_t>(best), ptr, size, dev);
    live_[{dev, ptr}].pool = id;
    return Status::success();
  }
  // 2. New memory from the window's heap (within the pool's maximum size).
  if (p->max_size && (size > p->max_size || p->reserved > p->max_size - size)) {
    s = Status::fail(err::MemoryAllocation, pool_name(dev, id) + " is at its maximum size (" +
                                                std::to_string(p->max_size) + " bytes)");
  } else {
    s = ops_.heap_alloc(dev, p->window, size, ptr);
    if (!s.ok() && s.code == err::MemoryAllocation) {
      release_cached(dev);  // other pools' idle memory first, as the driver does
      s = ops_.heap_alloc(dev, p->window, size, ptr);
    }
    if (s.ok()) {
      p->reserved += size;
      p->reserved_high = std::max(p->reserved_high, p->reserved);
      p->used += size;
      p->used_high = std::max(p->used_high, p->used);
      ++p->live;
      live_[{dev, ptr}] = Live{id, size, size};
      return s;
    }
  }
  // 3. A block another stream freed that has not completed yet: this stream waits for it.
  if (p->internal)
    for (size_t i = 0; i < p->cache.size(); ++i) {
      Cached& c = p->cache[i];
      if (c.size < size || !reusable(dev, c)) continue;
      if (c.event && !ops_.wait(dev, stream, c.event).ok()) continue;
      take(*p, i, ptr, size, dev);
      live_[{dev, ptr}].pool = id;
      return Status::success();
    }
  return s;
}

Status MemPools::free(uint32_t dev, uint64_t ptr, uint64_t stream, uint64_t& size) {
  auto it = live_.find({dev, ptr});
  if (it == live_.end())
    return invalid("stream-ordered free of a pointer that is not a live pool allocation");
  auto pit = pools_.find({dev, it->second.pool});
  if (pit == pools_.end()) return invalid("pool allocation without its pool");  // not reached
  Pool& p = pit->second;
  uint64_t event = 0;
  if (Status s = ops_.record(dev, stream, event); !s.ok()) return s;
  size = it->second.size;
  p.cache.push_back(Cached{ptr, it->second.block, stream, event});
  p.used -= it->second.block;
  --p.live;
  live_.erase(it);
  if (p.destroyed) {
    shrink(dev, p, 0);
    drop_if_unused(pit->first);
  }
  return Status::success();
}

Status MemPools::set_attr(uint32_t dev, uint64_t id, uint32_t attr, uint64_t value) {
  Status s;
  Pool* p = find(dev, id, s);
  if (!p) return s;
  switch (attr) {
    case kFollowEventDependencies:
      p->follow = value != 0;
      return s;
    case kAllowOpportunistic:
      p->opportunistic = value != 0;
      return s;
    case kAllowInternalDependencies:
      p->internal = value != 0;
      return s;
    case kReleaseThreshold:
      p->threshold = value;
      return s;
    case kReservedHigh:
    case kUsedHigh:
      if (value != 0) return invalid("a memory pool's high-water marks can only be reset to 0");
      if (attr == kReservedHigh)
        p->reserved_high = p->reserved;
      else
        p->used_high = p->used;
      return s;
    case kReservedCurrent:
    case kUsedCurrent:
      return invalid("memory pool attribute " + std::to_string(attr) + " is read-only");
    default:
      return invalid("unknown memory pool attribute " + std::to_string(attr));
  }
}

Status MemPools::get_attr(uint32_t dev, uint64_t id, uint32_t attr, uint64_t& value) {
  Status s;
  Pool* p = find(dev, id, s);
  if (!p) return s;
  // What the last synchronization released: frees that completed beyond the threshold.
  shrink(dev, *p, std::max(p->threshold, p->used));
  switch (attr) {
    case kFollowEventDependencies:
      value = p->follow;
      break;
    case kAllowOpportunistic:
      value = p->opportunistic;
      break;
    case kAllowInternalDependencies:
      value = p->internal;
      break;
    case kReleaseThreshold:
      value = p->threshold;
      break;
    case kReservedCurrent:
      value = p->reserved;
      break;
    case kReservedHigh:
      value = p->reserved_high;
      break;
    case kUsedCurrent:
      value = p->used;
      break;
    case kUsedHigh:
      value = p->used_high;
      break;
    default:
      return invalid("unknown memory pool attribute " + std::to_string(attr));
  }
  return s;
}

Status MemPools::trim(uint32_t dev, uint64_t id, uint64_t keep) {
  Status s;
  Pool* p = find(dev, id, s);
  if (!p) return s;
  shrink(dev, *p, keep);
  return s;
}

void MemPools::trim_device(uint32_t dev) {
  for (auto it = pools_.begin(); it != pools_.end();) {
    auto next = std::next(it);
    if (it->first.first == dev) {
      Pool& p = it->second;
      shrink(dev, p, p.destroyed ? 0 : std::max(p.threshold, p.used));
      drop_if_unused(it->first);
    }
    it = next;
  }
}

void MemPools::release_cached(uint32_t dev) {
  for (auto it = pools_.begin(); it != pools_.end();) {
    auto next = std::next(it);
    if (it->first.first == dev) {
      shrink(dev, it->second, it->second.used);
      drop_if_unused(it->first);
    }
    it = next;
  }
}

void MemPools::forget_stream(uint32_t dev, uint64_t stream) {
  for (auto& [k, p] : pools_)
    if (k.first == dev)
      for (Cached& c : p.cache)
        if (c.stream == stream) c.stream = kNoStream;
}

void MemPools::forget_device(uint32_t dev) {
  for (auto it = pools_.begin(); it != pools_.end();)
    it = it->first.first == dev ? pools_.erase(it) : std::next(it);
  for (auto it = live_.begin(); it != live_.end();)
    it = it->first.first == dev ? live_.erase(it) : std::next(it);
}

uint64_t MemPools::reserved_bytes() const {
  uint64_t n = 0;
  for (const auto& [k, p] : pools_) n += p.reserved;
  return n;
}

}  // namespace rgpu::server
