#include "client/link_stats.h"

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <vector>

#include "proto/messages.h"

namespace rgpu::client {
namespace {

struct Count {
  uint64_t sync = 0, async = 0, out = 0, in = 0;
};

struct Stats {
  std::mutex mu;
  std::vector<Count> by_type = std::vector<Count>(1u << 16);
};

Stats& stats() {
  static Stats* s = new Stats;  // never destroyed: printed from atexit
  return *s;
}

void print() {
  Stats& s = stats();
  std::lock_guard<std::mutex> lock(s.mu);
  std::vector<uint32_t> types;
  for (uint32_t t = 0; t < s.by_type.size(); ++t)
    if (s.by_type[t].sync || s.by_type[t].async) types.push_back(t);
  std::sort(types.begin(), types.end(), [&](uint32_t a, uint32_t b) {
    const Count &x = s.by_type[a], &y = s.by_type[b];
    return x.sync + x.async > y.sync + y.async;
  });
  Count total;
  fprintf(stderr, "rgpu stats: requests sent (sync = round trips)\n");
  fprintf(stderr, "rgpu stats: %-28s %10s %10s %14s %14s\n", "request", "sync", "async",
          "bytes out", "bytes in");
  for (uint32_t t : types) {
    const Count& c = s.by_type[t];
    const char* name = proto::msg_name(static_cast<uint16_t>(t));
    fprintf(stderr, "rgpu stats: %-28s %10llu %10llu %14llu %14llu\n", name ? name : "?",
            static_cast<unsigned long long>(c.sync), static_cast<unsigned long long>(c.async),
            static_cast<unsigned long long>(c.out), static_cast<unsigned long long>(c.in));
    total.sync += c.sync;
    total.async += c.async;
    total.out += c.out;
    total.in += c.in;
  }
  fprintf(stderr, "rgpu stats: %-28s %10llu %10llu %14llu %14llu\n", "total",
          static_cast<unsigned long long>(total.sync), static_cast<unsigned long long>(total.async),
          static_cast<unsigned long long>(total.out), static_cast<unsigned long long>(total.in));
}

bool enabled() {
  static const bool on = [] {
    const char* v = getenv("RGPU_STATS");
    const bool yes = v && *v && strcmp(v, "0") != 0;
    if (yes) atexit(print);
    return yes;
  }();
  return on;
}

}  // namespace

void note_request(uint16_t type, bool sync, uint64_t out, uint64_t in) {
  if (!enabled()) return;
  Stats& s = stats();
  std::lock_guard<std::mutex> lock(s.mu);
  Count& c = s.by_type[type];
  (sync ? c.sync : c.async) += 1;
  c.out += out;
  c.in += in;
}

}  // namespace rgpu::client
