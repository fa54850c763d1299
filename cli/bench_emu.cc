#include "cli/bench_emu.h"

#include <cstdio>

#include "cli/bench.h"
#include "client/client.h"
#include "transport/tcp/net_emu.h"

namespace rgpu::cli {

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

void print_emu_rows(const std::string& spec, uint64_t max_bytes, const std::vector<Result>& all) {
  auto find = [&](const std::string& op, uint64_t bytes, const std::string& mode,
                  const std::string& transport) {
    return cli::find(all, op, bytes, mode, transport);
  };
  const char* emu = kEmuTransport;
  printf("\nunder network emulation (RGPU_NET_EMU=%s) vs plain TCP, same run:\n", spec.c_str());
  printf("%-14s %8s %12s %12s %12s %12s %8s %8s\n", "operation", "bytes", "rgpu tcp", "rgpu emu",
         "raw link", "link emu", "emu/tcp", "emu/link");
  auto row = [&](const std::string& label, const std::string& op, uint64_t bytes,
                 const std::string& link_op) {
    auto t = find(op, bytes, "rgpu", "tcp"), g = find(op, bytes, "rgpu", emu);
    const Result* l = link_op.empty() ? nullptr : find(link_op, bytes, "link", emu);
    const Result* lp = link_op.empty() ? nullptr : find(link_op, bytes, "link", "");
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
