#include "client/link_stats.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <vector>

#include "proto/messages.h"

namespace rgpu::client {

struct LinkStats::Table {
  struct Count {
    uint64_t sync = 0, async = 0, out = 0, in = 0, local = 0;
  };
  std::mutex mu;
  std::vector<Count> by_type = std::vector<Count>(1u << 16);
  uint64_t hashes_asked = 0;

  void print();
};

namespace {

LinkStats::Table* g_printed = nullptr;  // the table this library made, printed at exit

void print_at_exit() { g_printed->print(); }

}  // namespace

void LinkStats::Table::print() {
  std::lock_guard<std::mutex> lock(mu);
  std::vector<uint32_t> types;
  for (uint32_t t = 0; t < by_type.size(); ++t)
    if (by_type[t].sync || by_type[t].async) types.push_back(t);
  std::sort(types.begin(), types.end(), [&](uint32_t a, uint32_t b) {
    const Count &x = by_type[a], &y = by_type[b];
    return x.sync + x.async > y.sync + y.async;
  });
  Count total;
  fprintf(stderr, "rgpu stats: requests sent (sync = round trips)\n");
  fprintf(stderr, "rgpu stats: %-28s %10s %10s %14s %14s\n", "request", "sync", "async",
          "bytes out", "bytes in");
  for (uint32_t t : types) {
    const Count& c = by_type[t];
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
  auto of = [&](proto::MsgId id) { return by_type[static_cast<uint16_t>(id)]; };
  using proto::MsgId;
  const Count ship = of(MsgId::ModuleShip), load = of(MsgId::ModuleLoad);
  const uint64_t lookups =
      of(MsgId::ModuleHave).sync + of(MsgId::ModuleResolve).sync + of(MsgId::ModuleLookup).sync;
  fprintf(stderr,
          "rgpu stats: images shipped %llu (%llu bytes), image look-ups %llu (%llu hashes), "
          "round trips %llu\n",
          static_cast<unsigned long long>(ship.sync + load.sync),
          static_cast<unsigned long long>(ship.out + load.out),
          static_cast<unsigned long long>(lookups), static_cast<unsigned long long>(hashes_asked),
          static_cast<unsigned long long>(total.sync));
  for (uint32_t t = 0; t < by_type.size(); ++t)
    if (by_type[t].local) {
      const char* name = proto::msg_name(static_cast<uint16_t>(t));
      fprintf(stderr, "rgpu stats: answered here (no request) %-20s %10llu\n", name ? name : "?",
              static_cast<unsigned long long>(by_type[t].local));
    }
}

LinkStats& LinkStats::of_this_library() {
  static LinkStats* s = new LinkStats;  // never destroyed: printed from atexit
  return *s;
}

LinkStats::LinkStats()
    : table_([] {
        const char* v = getenv("RGPU_STATS");
        return v && *v && strcmp(v, "0") != 0 ? new Table : nullptr;
      }()) {
  if (!table_) return;
  g_printed = table_;
  atexit(print_at_exit);
}

void LinkStats::note_request(uint16_t type, bool sync, uint64_t out, uint64_t in) {
  Table* t = table_;
  if (!t) return;
  std::lock_guard<std::mutex> lock(t->mu);
  Table::Count& c = t->by_type[type];
  (sync ? c.sync : c.async) += 1;
  c.out += out;
  c.in += in;
}

void LinkStats::note_local(uint16_t type) {
  Table* t = table_;
  if (!t) return;
  std::lock_guard<std::mutex> lock(t->mu);
  t->by_type[type].local += 1;
}

void LinkStats::note_hashes_asked(uint64_t n) {
  Table* t = table_;
  if (!t) return;
  std::lock_guard<std::mutex> lock(t->mu);
  t->hashes_asked += n;
}

}  // namespace rgpu::client
