// Small allocations from slabs (see small_allocs.h).
#include "client/small_allocs.h"

#include <algorithm>
#include <bit>
#include <iterator>

namespace rgpu::client {

SmallAllocations::SmallAllocations(uint64_t max_bytes)
    : max_bytes_(std::min<uint64_t>(max_bytes, kSlabBytes / 8)) {}

uint64_t SmallAllocations::chunk_bytes(uint64_t size) {
  return std::max<uint64_t>(kMinChunk, std::bit_ceil(size));
}

uint64_t SmallAllocations::take(int dev, uint64_t size, bool* reclaimable) {
  const uint64_t chunk = chunk_bytes(size);
  std::lock_guard<std::mutex> lock(mu_);
  bool waiting = false;
  for (auto& [base, s] : slabs_) {
    if (s.device != dev || s.chunk != chunk || s.retired) continue;
    waiting = waiting || !s.quarantine.empty();
    if (s.free.empty()) continue;
    const uint32_t i = s.free.back();
    s.free.pop_back();
    s.used[i] = 1;
    ++s.in_use;
    return base + i * chunk;
  }
  if (reclaimable) *reclaimable = waiting;
  return 0;
}

uint64_t SmallAllocations::add_slab(int dev, uint64_t base, uint64_t size) {
  Slab s;
  s.device = dev;
  s.chunk = chunk_bytes(size);
  const uint32_t n = chunks_per(s);
  s.used.assign(n, 0);
  s.free.reserve(n);
  for (uint32_t i = n; i-- > 1;) s.free.push_back(i);  // chunk 0 is taken; low ones go first
  s.used[0] = 1;
  s.in_use = 1;
  std::lock_guard<std::mutex> lock(mu_);
  auto next = slabs_.lower_bound(base);
  if ((next != slabs_.end() && next->first - base < kSlabBytes) ||
      (next != slabs_.begin() && base - std::prev(next)->first < kSlabBytes))
    return 0;  // overlaps a slab (a server handing out one address twice)
  slabs_[base] = std::move(s);
  return base;
}

uint64_t SmallAllocations::begin_reclaim(int dev) {
  std::lock_guard<std::mutex> lock(mu_);
  return epoch_[dev]++;
}

void SmallAllocations::finish_reclaim(int dev, uint64_t complete) {
  std::lock_guard<std::mutex> lock(mu_);
  for (auto& [base, s] : slabs_) {
    if (s.device != dev) continue;
    auto keep = std::partition(s.quarantine.begin(), s.quarantine.end(),
                               [&](const auto& q) { return q.second >= complete; });
    for (auto it = keep; it != s.quarantine.end(); ++it) s.free.push_back(it->first);
    s.quarantine.erase(keep, s.quarantine.end());
  }
}

SmallAllocations::Slab* SmallAllocations::chunk_at(uint64_t ptr, uint64_t* base, uint32_t* index) {
  auto it = slabs_.upper_bound(ptr);
  if (it == slabs_.begin()) return nullptr;
  --it;
  Slab& s = it->second;
  const uint64_t off = ptr - it->first;
  if (off >= kSlabBytes || off % s.chunk != 0) return nullptr;
  *base = it->first;
  *index = static_cast<uint32_t>(off / s.chunk);
  return &s;
}

bool SmallAllocations::mark_exported(uint64_t ptr, bool* fresh) {
  std::lock_guard<std::mutex> lock(mu_);
  uint64_t base = 0;
  uint32_t i = 0;
  Slab* s = chunk_at(ptr, &base, &i);
  if (!s || !s->used[i]) return false;
  if (fresh) *fresh = s->used[i] == 1;
  s->used[i] = 2;
  s->retired = true;  // its kernels reach the whole slab: nothing more is handed out of it
  s->free.clear();
  s->quarantine.clear();
  return true;
}

void SmallAllocations::unmark_exported(uint64_t ptr) {
  std::lock_guard<std::mutex> lock(mu_);
  uint64_t base = 0;
  uint32_t i = 0;
  if (Slab* s = chunk_at(ptr, &base, &i); s && s->used[i] == 2) s->used[i] = 1;
}

bool SmallAllocations::release(uint64_t ptr, uint64_t* slab_to_free, bool* exported) {
  *slab_to_free = 0;
  if (exported) *exported = false;
  std::lock_guard<std::mutex> lock(mu_);
  uint64_t base = 0;
  uint32_t i = 0;
  Slab* found = chunk_at(ptr, &base, &i);
  if (!found || !found->used[i]) return false;
  Slab& s = *found;
  if (s.used[i] == 2 && exported) *exported = true;  // its handle goes
  if (!s.retired) s.quarantine.emplace_back(i, epoch_[s.device]);
  s.used[i] = 0;
  --s.in_use;
  // An idle slab goes back when its class has a slab's worth of chunks elsewhere (so a program
  // that allocates and frees around a slab's edge does not get and give back a slab each time),
  // and a retired one as soon as it is idle.
  if (s.in_use == 0 && (s.retired || spare(s.device, s.chunk, base) >= chunks_per(s))) {
    *slab_to_free = base;
    slabs_.erase(base);
  }
  return true;
}

uint64_t SmallAllocations::spare(int dev, uint64_t chunk, uint64_t except) const {
  uint64_t n = 0;
  for (const auto& [base, s] : slabs_)
    if (base != except && s.device == dev && s.chunk == chunk && !s.retired)
      n += s.free.size() + s.quarantine.size();
  return n;
}

bool SmallAllocations::overlaps(uint64_t p, uint64_t n) const {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = slabs_.lower_bound(p);
  if (it != slabs_.end() && it->first - p < n) return true;  // one starts inside
  if (it == slabs_.begin()) return false;
  --it;
  return p - it->first < kSlabBytes;  // the one before reaches p
}

bool SmallAllocations::slab_of(uint64_t ptr, uint64_t* base) const {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = slabs_.upper_bound(ptr);
  if (it == slabs_.begin()) return false;
  --it;
  if (ptr - it->first >= kSlabBytes) return false;
  *base = it->first;
  return true;
}

void SmallAllocations::forget_device(int dev) {
  std::lock_guard<std::mutex> lock(mu_);
  std::erase_if(slabs_, [&](const auto& kv) { return kv.second.device == dev; });
  refused_.erase(dev);
}

void SmallAllocations::refuse_slabs(int dev) {
  std::lock_guard<std::mutex> lock(mu_);
  refused_[dev] = true;
}

void SmallAllocations::allow_slabs(int dev) {
  std::lock_guard<std::mutex> lock(mu_);
  refused_.erase(dev);
}

bool SmallAllocations::slabs_refused(int dev) const {
  std::lock_guard<std::mutex> lock(mu_);
  return refused_.count(dev) != 0;
}

SmallAllocations::Counts SmallAllocations::counts(int dev) const {
  std::lock_guard<std::mutex> lock(mu_);
  Counts c;
  for (const auto& [base, s] : slabs_) {
    if (s.device != dev) continue;
    ++c.slabs;
    c.in_use += s.in_use;
    c.quarantined += s.quarantine.size();
    c.retired += s.retired;
  }
  return c;
}

}  // namespace rgpu::client
