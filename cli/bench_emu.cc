#include "cli/bench_emu.h"

#include <cstdio>

#include "client/client.h"
#include "transport/tcp/net_emu.h"

namespace rgpu::cli {
namespace {

std::string human(uint64_t b) {
  const char* units[] = {"B", "KiB", "MiB", "GiB"};
  int u = 0;
  double v = static_cast<double>(b);
  while (v >= 1024 && u < 3) v /= 1024, ++u;
  char s[32];
  snprintf(s, sizeof s, "%g %s", v, units[u]);
  return s;
}

std::string cell(const std::optional<EmuValue>& r) {
  if (!r) return "-";
  char s[32];
  if (r->unit == "launches/s")
    snprintf(s, sizeof s, "%.0f/s", r->value);
  else
    snprintf(s, sizeof s, "%.3g %s", r->value, r->unit.c_str());
  return s;
}

std::string ratio(const std::optional<EmuValue>& a, const std::optional<EmuValue>& b) {
  if (!a || !b || b->value == 0) return "-";
  char s[16];
  snprintf(s, sizeof s, "%.2f", a->value / b->value);
  return s;
}

}  // namespace

std::optional<std::string> emu_spec(const std::string& arg) {
  std::string error;
  auto emu = transport::parse_net_emu(arg, error);
  if (!emu) {
    fprintf(stderr, "rgpu bench: --emu %s: bad part %s\n", arg.c_str(), error.c_str());
    return std::nullopt;
  }
  if (!emu->on()) {
    fprintf(stderr, "rgpu bench: --emu %s emulates nothing (give rtt=, gbps= or both)\n",
            arg.c_str());
    return std::nullopt;
  }
  return emu->spec();
}

bool server_emulates(const std::string& spec, std::string& what) {
  CudaError e;
  client::ServerLink* l = client::Client::get().link(0, &e);
  if (!l) {
    what = "rgpu tcp+emu: skipped, no server reached";
    return false;
  }
  auto announced = transport::net_emu_announced(l->hello().info);
  if (announced == spec) return true;
  fprintf(stderr,
          "rgpu bench: warning: the server (%s) %s; start it with RGPU_NET_EMU=%s for the rgpu "
          "rows under emulation (skipped)\n",
          l->hello().info.c_str(),
          announced ? ("emulates " + *announced + ", not " + spec).c_str() : "does not emulate",
          spec.c_str());
  what = "rgpu tcp+emu: skipped, the server " +
         (announced ? "emulates " + *announced : std::string("does not emulate")) +
         " (start rgpud with RGPU_NET_EMU=" + spec + ")";
  return false;
}

std::vector<std::pair<std::string, std::string>> emu_worker_env(const std::string& lib_dir,
                                                                const std::string& spec) {
  return {{"LD_LIBRARY_PATH", lib_dir},
          {"RGPU_TRANSPORT", "tcp"},
          {"RGPU_TLS", "0"},
          {"RGPU_NET_EMU", spec}};
}

void with_emulated_links(const std::string& spec, const std::function<void()>& measure) {
  std::string error;
  auto emu = transport::parse_net_emu(spec, error);
  transport::NetEmuScope scope(emu ? *emu : transport::NetEmu{});
  measure();
}

void print_emu_rows(const std::string& spec, uint64_t max_bytes, const EmuLookup& find) {
  const char* emu = kEmuTransport;
  printf("\nunder network emulation (RGPU_NET_EMU=%s) vs plain TCP, same run:\n", spec.c_str());
  printf("%-14s %8s %12s %12s %12s %12s %8s %8s\n", "operation", "bytes", "rgpu tcp", "rgpu emu",
         "raw link", "link emu", "emu/tcp", "emu/link");
  auto row = [&](const std::string& label, const std::string& op, uint64_t bytes,
                 const std::string& link_op) {
    auto t = find(op, bytes, "rgpu", "tcp"), g = find(op, bytes, "rgpu", emu);
    auto l = link_op.empty() ? std::nullopt : find(link_op, bytes, "link", emu);
    auto lp = link_op.empty() ? std::nullopt : find(link_op, bytes, "link", "");
    printf("%-14s %8s %12s %12s %12s %12s %8s %8s\n", label.c_str(),
           bytes ? human(bytes).c_str() : "-", cell(t).c_str(), cell(g).c_str(), cell(lp).c_str(),
           cell(l).c_str(), ratio(g, t).c_str(), ratio(g, l).c_str());
  };
  row("sync call", "sync_call", 0, "sync_call");
  row("launch rate", "launch_rate", 0, "");
  row("graph launches", "graph_launch_rate", 0, "");
  row("graph replay", "graph_replay", 0, "");
  row("same on stream", "stream_replay", 0, "");
  for (uint64_t b : {4ull << 10, 64ull << 10, 1ull << 20, 2ull << 20, 8ull << 20, 64ull << 20})
    row("malloc+free/s", "alloc_rate", b, "");
  for (const char* op : {"h2d_pinned", "d2h_pinned", "h2d_pageable", "d2h_pageable"})
    for (uint64_t b = 4; b <= max_bytes; b *= 16) row(op, op, b, "stream");
  std::string error;
  auto e = transport::parse_net_emu(spec, error);
  auto link_rtt = find("sync_call", 0, "link", emu), plain_rtt = find("sync_call", 0, "link", "");
  if (e && e->rtt_ns && link_rtt)
    printf("  emulated link round trip %.1f us: rtt %.1f us + %.1f us (the plain loopback's %s)\n",
           link_rtt->value, static_cast<double>(e->rtt_ns) / 1e3,
           link_rtt->value - static_cast<double>(e->rtt_ns) / 1e3, cell(plain_rtt).c_str());
}

}  // namespace rgpu::cli
