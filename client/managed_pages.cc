#include "client/managed_pages.h"

#include <algorithm>

namespace rgpu::client {

PageTracker::PageTracker(uint64_t size, PageState initial)
    : size_(size), pages_((size + kGranule - 1) / kGranule, initial) {}

size_t PageTracker::end(uint64_t offset, uint64_t n) const {
  if (offset >= size_ || n == 0) return first(std::min(offset, size_));
  const uint64_t last = std::min(size_, offset + std::min(n, size_ - offset));
  return (last + kGranule - 1) / kGranule;
}

PageRun PageTracker::run(size_t a, size_t b) const {
  const uint64_t lo = a * kGranule, hi = std::min<uint64_t>(b * kGranule, size_);
  return {lo, hi > lo ? hi - lo : 0};
}

PageRun PageTracker::granule(uint64_t offset) const {
  const size_t g = first(offset);
  return run(g, g + 1);
}

void PageTracker::to_device(uint64_t offset, uint64_t n, std::vector<PageRun>* send,
                            std::vector<PageRun>* protect) {
  const size_t a = first(offset), b = end(offset, n);
  auto add = [this](std::vector<PageRun>* out, size_t g) {
    if (!out) return;
    PageRun r = run(g, g + 1);
    if (!out->empty() && out->back().offset + out->back().size == r.offset)
      out->back().size += r.size;
    else
      out->push_back(r);
  };
  for (size_t g = a; g < b; ++g) {
    if (pages_[g] == PageState::Device) continue;
    if (pages_[g] == PageState::Dirty) add(send, g);
    add(protect, g);
    pages_[g] = PageState::Device;
  }
}

void PageTracker::flush(uint64_t offset, uint64_t n, std::vector<PageRun>* send) {
  const size_t a = first(offset), b = end(offset, n);
  for (size_t g = a; g < b; ++g) {
    if (pages_[g] != PageState::Dirty) continue;
    PageRun r = run(g, g + 1);
    if (!send->empty() && send->back().offset + send->back().size == r.offset)
      send->back().size += r.size;
    else
      send->push_back(r);
    pages_[g] = PageState::Clean;
  }
}

std::vector<PageRun> PageTracker::device_runs(uint64_t offset, uint64_t n, uint64_t max_run) const {
  std::vector<PageRun> out;
  const size_t a = first(offset), b = end(offset, n);
  const size_t max_granules = std::max<uint64_t>(1, max_run / kGranule);
  for (size_t g = a; g < b;) {
    if (pages_[g] != PageState::Device) {
      ++g;
      continue;
    }
    size_t h = g;
    while (h < b && h - g < max_granules && pages_[h] == PageState::Device) ++h;
    out.push_back(run(g, h));
    g = h;
  }
  return out;
}

PageRun PageTracker::device_run_at(uint64_t offset, uint64_t max) const {
  if (offset >= size_) return {};
  auto runs = device_runs(offset, std::min(max, size_ - offset), max);
  if (runs.empty() || runs[0].offset != granule(offset).offset) return {granule(offset).offset, 0};
  return runs[0];
}

void PageTracker::set(const PageRun& r, PageState s) {
  if (r.size == 0) return;
  std::fill(pages_.begin() + first(r.offset), pages_.begin() + end(r.offset, r.size), s);
}

uint64_t PageTracker::count(PageState s) const {
  return static_cast<uint64_t>(std::count(pages_.begin(), pages_.end(), s));
}

}  // namespace rgpu::client
