#include "cli/bench.h"

#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <map>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "cli/bench_app.h"
#include "cli/bench_emu.h"
#include "cli/bench_peer.h"
#include "cli/bench_startup.h"
#include "cli/bench_targets.h"
#include "client/client.h"
#include "client/config.h"
#include "common/strings.h"
#include "transport/tcp/tcp.h"

namespace rgpu::cli {
namespace {

using Clock = std::chrono::steady_clock;

// Runs the measuring program with `env` added; returns its results (empty on failure).
std::vector<Result> run_worker(const std::string& worker, const std::string& mode,
                               const std::string& transport,
                               const std::vector<std::pair<std::string, std::string>>& env,
                               uint64_t max_bytes, std::string& device) {
  int out[2];
  if (pipe(out) != 0) return {};
  pid_t pid = fork();
  if (pid == 0) {
    dup2(out[1], 1);
    close(out[0]);
    close(out[1]);
    for (auto& [k, v] : env) setenv(k.c_str(), v.c_str(), 1);
    std::string arg = std::to_string(max_bytes);
    execl(worker.c_str(), worker.c_str(), arg.c_str(), static_cast<char*>(nullptr));
    fprintf(stderr, "rgpu bench: cannot run %s: %s\n", worker.c_str(), strerror(errno));
    _exit(127);
  }
  close(out[1]);
  std::vector<Result> results;
  FILE* f = fdopen(out[0], "r");
  char line[512];
  while (f && fgets(line, sizeof line, f)) {
    char op[64], unit[32];
    unsigned long long bytes;
    double value;
    if (sscanf(line, "RESULT %63s %llu %lf %31s", op, &bytes, &value, unit) == 4)
      results.push_back({op, bytes, mode, value, unit, transport});
    else if (strncmp(line, "DEVICE ", 7) == 0)
      device = std::string(line + 7, strcspn(line + 7, "\n"));
  }
  if (f) fclose(f);
  int st = 0;
  waitpid(pid, &st, 0);
  if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) {
    fprintf(stderr, "rgpu bench: the %s run failed (status %d)\n", mode.c_str(), st);
  }
  return results;
}

// The raw link: TCP on loopback with rgpu's socket settings, ping-pong and one-way streams.
std::vector<Result> measure_link(uint64_t max_bytes) {
  std::vector<Result> results;
  auto listener = transport::tcp_listen("127.0.0.1", 0);
  std::unique_ptr<transport::Connection> server;
  std::thread accept([&] { server = listener->accept(); });
  auto client = transport::tcp_connect("127.0.0.1", listener->port());
  accept.join();

  fprintf(stderr, "  raw TCP round trip...\n");
  std::thread echo([&] {
    char b[8];
    try {
      for (;;) {
        server->recv(b, 8);
        server->send(b, 8);
      }
    } catch (...) {
    }
  });
  std::vector<double> us;
  char b[8] = {};
  for (int i = 0; i < 5500; ++i) {
    auto t0 = Clock::now();
    client->send(b, 8);
    client->recv(b, 8);
    if (i >= 500)
      us.push_back(std::chrono::duration<double, std::micro>(Clock::now() - t0).count());
  }
  std::sort(us.begin(), us.end());
  results.push_back({"sync_call", 0, "link", us[us.size() / 2], "us", ""});
  client->shutdown();
  echo.join();

  // One-way streams: `bytes` across, then a one-byte acknowledgement (a copy's whole time).
  auto listener2 = transport::tcp_listen("127.0.0.1", 0);
  std::thread accept2([&] { server = listener2->accept(); });
  client = transport::tcp_connect("127.0.0.1", listener2->port());
  accept2.join();
  std::vector<char> src(max_bytes, 1), dst(max_bytes);
  for (uint64_t bytes = 4; bytes <= max_bytes; bytes *= 16) {
    auto transfer = [&](int reps) {
      std::thread sink([&] {
        for (int r = 0; r < reps; ++r) {
          server->recv(dst.data(), bytes);
          server->send("k", 1);
        }
      });
      char k;
      for (int r = 0; r < reps; ++r) {
        client->send(src.data(), bytes);
        client->recv(&k, 1);
      }
      sink.join();
    };
    auto t0 = Clock::now();
    transfer(1);
    double one = std::max(std::chrono::duration<double>(Clock::now() - t0).count(), 1e-7);
    int reps = static_cast<int>(std::min(2000.0, std::max(3.0, 0.25 / one)));
    t0 = Clock::now();
    transfer(reps);
    double s = std::chrono::duration<double>(Clock::now() - t0).count();
    results.push_back({"stream", bytes, "link", bytes * reps / s / 1e9, "GB/s", ""});
  }
  fprintf(stderr, "  raw TCP streams done\n");
  return results;
}

// rgpu's own round trip without GPU work (a Ping request), to split the synchronous call's time
// into link, protocol and GPU.
std::optional<Result> measure_ping() {
  client::Client& c = client::Client::get();
  CudaError e;
  client::ServerLink* l = c.link(0, &e);
  if (!l) return std::nullopt;
  std::vector<double> us;
  for (int i = 0; i < 5500; ++i) {
    auto t0 = Clock::now();
    if (l->call<proto::PingMsg>(proto::PingReq{}) != err::Success) return std::nullopt;
    if (i >= 500)
      us.push_back(std::chrono::duration<double, std::micro>(Clock::now() - t0).count());
  }
  std::sort(us.begin(), us.end());
  return Result{"ping", 0, "rgpu", us[us.size() / 2], "us", l->hello().transport};
}

bool write_json(const std::string& path, const std::vector<Result>& rs) {
  std::ofstream out(path);
  out << "[\n";
  for (size_t i = 0; i < rs.size(); ++i)
    out << "  {\"op\": \"" << rs[i].op << "\", \"bytes\": " << rs[i].bytes << ", \"mode\": \""
        << rs[i].mode << "\", \"value\": " << rs[i].value << ", \"unit\": \"" << rs[i].unit << "\""
        << (rs[i].transport.empty() ? "" : ", \"transport\": \"" + rs[i].transport + "\"") << "}"
        << (i + 1 < rs.size() ? "," : "") << "\n";
  out << "]\n";
  return out.good();
}

const char* kPlotScript = R"PY(
import json, sys
import matplotlib
matplotlib.use("Agg")
import matplotlib.pyplot as plt
rows = json.load(open(sys.argv[1]))
fig, axes = plt.subplots(1, 2, figsize=(13, 5), sharey=True)
styles = {"native": "-", "rgpu": "--", "link": ":"}
for ax, direction in zip(axes, ["h2d", "d2h"]):
    for mode, transport in [("native", None), ("rgpu", "tcp"), ("rgpu", "shm")]:
        for mem in ["pinned", "pageable"]:
            pts = sorted((r["bytes"], r["value"]) for r in rows
                         if r["op"] == f"{direction}_{mem}" and r["mode"] == mode
                         and r.get("transport") == transport)
            if pts:
                label = f"{mode} {transport} {mem}" if transport else f"{mode} {mem}"
                ax.plot(*zip(*pts), styles[mode] if transport != "shm" else "-.", marker="o",
                        label=label)
    pts = sorted((r["bytes"], r["value"]) for r in rows
                 if r["op"] == "stream" and r["mode"] == "link" and not r.get("transport"))
    if pts:
        ax.plot(*zip(*pts), styles["link"], marker="x", color="black", label="raw TCP stream")
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_xlabel("bytes per copy")
    ax.set_title({"h2d": "host to device", "d2h": "device to host"}[direction])
    ax.grid(True, which="both", alpha=0.3)
axes[0].set_ylabel("GB/s")
axes[1].legend(loc="lower right", fontsize=8)
fig.suptitle(sys.argv[3])
fig.tight_layout()
fig.savefig(sys.argv[2], dpi=110)
)PY";

bool write_plot(const std::string& json, const std::string& png, const std::string& title) {
  std::string script = "/tmp/rgpu-bench-plot-" + std::to_string(getpid()) + ".py";
  std::ofstream(script) << kPlotScript;
  std::string cmd = "python3 '" + script + "' '" + json + "' '" + png + "' '" + title + "'";
  int rc = system(cmd.c_str());
  unlink(script.c_str());
  if (rc != 0)
    fprintf(stderr,
            "rgpu bench: --plot needs python3 with matplotlib (apt-get install "
            "python3-matplotlib)\n");
  return rc == 0;
}

// Sizes of the allocation-rate rows (bench/worker.cu measures the same).
constexpr uint64_t kAllocSizes[] = {4ull << 10, 64ull << 10, 1ull << 20,
                                    2ull << 20, 8ull << 20,  64ull << 20};

// TLS against plain TCP, both through rgpu in this run: what encryption costs.
void print_tls_rows(const std::vector<Result>& all, const std::string& server, uint64_t max_bytes) {
  printf("\nTLS (rgpud at %s) vs plain TCP, same run:\n", server.c_str());
  printf("%-14s %8s %12s %12s %8s\n", "operation", "bytes", "rgpu tcp", "rgpu tls", "tls/tcp");
  auto row = [&](const std::string& label, const std::string& op, uint64_t bytes) {
    const Result* t = find(all, op, bytes, "rgpu", "tcp");
    const Result* s = find(all, op, bytes, "rgpu", "tls");
    printf("%-14s %8s %12s %12s %8s\n", label.c_str(), bytes ? human(bytes).c_str() : "-",
           cell(t).c_str(), cell(s).c_str(), ratio(s, t).c_str());
  };
  row("sync call", "sync_call", 0);
  row("launch rate", "launch_rate", 0);
  row("graph launches", "graph_launch_rate", 0);
  row("graph replay", "graph_replay", 0);
  row("same on stream", "stream_replay", 0);
  for (const char* op : {"h2d_pinned", "d2h_pinned", "h2d_pageable", "d2h_pageable"})
    for (uint64_t b = 4; b <= max_bytes; b *= 16) row(op, op, b);
  const Result* t = find(all, "sync_call", 0, "rgpu", "tcp");
  const Result* s = find(all, "sync_call", 0, "rgpu", "tls");
  if (t && s) printf("  sync call over TLS: %+.1f us\n", s->value - t->value);
}

// A captured graph's replay against issuing the same calls on a stream, for each run.
void print_graph_summary(const std::vector<Result>& all) {
  const char* names[][2] = {{"native", ""}, {"rgpu", "tcp"}, {"rgpu", "shm"}, {"rgpu", "tls"}};
  bool header = false;
  for (auto& [mode, transport] : names) {
    const Result* g = find(all, "graph_replay", 0, mode, transport);
    const Result* s = find(all, "stream_replay", 0, mode, transport);
    if (!g || !s) continue;
    if (!header) printf("captured graph (100 empty kernels, memset, copy) vs the same calls:\n");
    header = true;
    printf("  %-6s %-3s: graph launch+sync %.1f us, 102 calls+sync %.1f us = %.2f\n", mode,
           transport, g->value, s->value, g->value / s->value);
  }
}

void usage() {
  fprintf(stderr,
          "usage: rgpu bench [--max-size SIZE] [--json FILE] [--plot FILE.png] [--tls HOST:PORT]\n"
          "                  [--no-app] [--no-startup] [--emu SPEC]\n"
          "       rgpu bench --peer [--max-size SIZE] [--json FILE]\n"
          "  Measures, in one run: the latency of a synchronous call, the empty-kernel launch\n"
          "  rate, the cudaGraphLaunch rate of a one-kernel graph, a captured graph's replay (100\n"
          "  empty kernels, a memset and a copy) against the same calls on a stream,\n"
          "  cudaMalloc+cudaFree pairs per second (4 KiB to 64 MiB), and host<->device copy\n"
          "  bandwidth (pinned and pageable, 4 B to --max-size,\n"
          "  default 1GiB), natively (when this machine has a GPU), through rgpu (RGPU_SERVERS),\n"
          "  and over the raw link (TCP on loopback, when the server is on this machine).\n"
          "  --tls HOST:PORT: also through rgpu over TLS to the rgpud there (one started with\n"
          "  --tls-cert; RGPU_TLS_CA, RGPU_TLS_CERT/KEY and RGPU_TOKEN as for any client), with\n"
          "  the TLS cost against plain TCP in the same run.\n"
          "  --emu SPEC: also the rgpu rows over TCP and the raw link under network emulation\n"
          "  (RGPU_NET_EMU=SPEC, e.g. rtt=25us,gbps=100; rgpud must run with the same), labelled\n"
          "  tcp+emu.\n"
          "  When python3 can import torch, also the median step time of a small CNN's training\n"
          "  (examples/torch_train.py, batch 64) natively and through rgpu; --no-app skips it.\n"
          "  Start-up and small calls (--no-startup skips them): a fresh process's time to its\n"
          "  first cuBLAS SGEMM (and PyTorch's first tensor), and the time and round trips per\n"
          "  iteration of small-call loops (docs/benchmarks.md).\n"
          "  --peer: copies from device 0 to device 1 of RGPU_SERVERS, on two servers (4 B to\n"
          "  --max-size in powers of 4): cudaMemcpyPeer between the servers, relaying through\n"
          "  this client (D2H then H2D), and a raw TCP stream to the second server's address\n"
          "  (when it is on this machine); bandwidth, latency up to 64 KiB, and ratios.\n");
}

}  // namespace

int bench_main(int argc, char** argv, const char* lib_dir, const char* exe_dir) {
  uint64_t max_bytes = 1ull << 30;
  std::string json, plot, tls_server, emu;
  bool app = true, peer = false, startup = true;
  for (int i = 0; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--no-app") {
      app = false;
    } else if (a == "--no-startup") {
      startup = false;
    } else if (a == "--peer") {
      peer = true;
    } else if ((a == "--json" || a == "--plot" || a == "--max-size" || a == "--tls" ||
                a == "--emu") &&
               i + 1 < argc) {
      std::string v = argv[++i];
      if (a == "--emu") {
        auto s = emu_spec(v);
        if (!s) return 2;
        emu = *s;
      }
      if (a == "--tls") {
        if (!parse_host_port(v)) {
          usage();
          return 2;
        }
        tls_server = v;
      }
      if (a == "--json") json = v;
      if (a == "--plot") plot = v;
      if (a == "--max-size") {
        auto s = parse_size(v);
        if (!s || *s < 4) {
          usage();
          return 2;
        }
        max_bytes = *s;
      }
    } else {
      usage();
      return 2;
    }
  }
  std::string worker;
  for (const char* rel :
       {"/../bench/rgpu-bench-worker", "/rgpu-bench-worker", "/../libexec/rgpu-bench-worker"}) {
    std::string c = std::string(exe_dir) + rel;
    if (access(c.c_str(), X_OK) == 0) {
      worker = c;
      break;
    }
  }
  if (worker.empty()) {
    fprintf(stderr, "rgpu bench: the measuring program rgpu-bench-worker is not installed\n");
    return 1;
  }
  if (peer) return bench_peer(worker, lib_dir, max_bytes, json);
  const char* servers = getenv("RGPU_SERVERS");
  std::vector<std::string> errors;
  auto devices = client::parse_servers(servers ? servers : "127.0.0.1:7766", errors);
  std::vector<std::string> notes;
  std::vector<Result> all;
  std::string device_native, device_rgpu;

  if (access("/dev/nvidiactl", F_OK) == 0) {
    fprintf(stderr, "rgpu bench: native run (NVIDIA's libcudart)...\n");
    const char* root = getenv("RGPU_CUDA_ROOT");
    std::string native_lib = std::string(root ? root : "/usr/local/cuda") + "/lib64";
    auto r = run_worker(worker, "native", "", {{"LD_LIBRARY_PATH", native_lib}}, max_bytes,
                        device_native);
    all.insert(all.end(), r.begin(), r.end());
  } else {
    notes.push_back("native: skipped, no GPU on this machine");
  }
  const bool local = !devices.empty() && is_loopback_name(devices[0].host);
  std::vector<std::string> transports = {"tcp"};
  if (local) transports.push_back("shm");
  for (const std::string& t : transports) {
    fprintf(stderr, "rgpu bench: through rgpu over %s (%s)...\n", t.c_str(),
            servers ? servers : "127.0.0.1:7766");
    auto r = run_worker(worker, "rgpu", t,
                        {{"LD_LIBRARY_PATH", lib_dir}, {"RGPU_TRANSPORT", t}, {"RGPU_TLS", "0"}},
                        max_bytes, device_rgpu);
    all.insert(all.end(), r.begin(), r.end());
  }
  if (!tls_server.empty()) {
    fprintf(stderr, "rgpu bench: through rgpu over TLS (%s)...\n", tls_server.c_str());
    std::string device_tls;
    auto r = run_worker(worker, "rgpu", "tls",
                        {{"LD_LIBRARY_PATH", lib_dir},
                         {"RGPU_SERVERS", tls_server},
                         {"RGPU_TRANSPORT", "tcp"},
                         {"RGPU_TLS", "1"}},
                        max_bytes, device_tls);
    all.insert(all.end(), r.begin(), r.end());
  }
  if (!local) notes.push_back("shm: skipped, the server is not on this machine");
  if (auto p = measure_ping()) all.push_back(*p);
  if (local) {
    fprintf(stderr, "rgpu bench: raw link (TCP on loopback)...\n");
    auto l = measure_link(max_bytes);
    all.insert(all.end(), l.begin(), l.end());
  } else {
    notes.push_back(
        "link: skipped, the server is not on this machine (the raw link is measured on loopback)");
  }

  if (!emu.empty()) {  // the same rows under network emulation (cli/bench_emu.cc)
    std::string note;
    if (server_emulates(emu, note)) {
      fprintf(stderr, "rgpu bench: through rgpu over TCP under emulation (%s)...\n", emu.c_str());
      std::string device_emu;
      auto r = run_worker(worker, "rgpu", kEmuTransport, emu_worker_env(lib_dir, emu), max_bytes,
                          device_emu);
      all.insert(all.end(), r.begin(), r.end());
    } else {
      notes.push_back(note);
    }
    if (local)
      with_emulated_links(emu, [&] {
        fprintf(stderr, "rgpu bench: raw link under emulation (%s)...\n", emu.c_str());
        for (Result& l : measure_link(max_bytes))
          all.push_back({l.op, l.bytes, l.mode, l.value, l.unit, kEmuTransport});
      });
  }

  // The application row: the small CNN's step time (PyTorch reads CUDA_VISIBLE_DEVICES itself,
  // so the rgpu runs leave it alone; rgpu's libraries come first on the library path).
  const std::string script = app ? find_train_script(exe_dir) : "";
  if (app && script.empty())
    notes.push_back("CNN step: skipped, examples/torch_train.py not found");
  if (!script.empty() && system("python3 -c 'import torch' >/dev/null 2>&1") == 0) {
    const int steps = 200;  // as issue 13 defines the target (the first five are not timed)
    fprintf(stderr, "rgpu bench: a small CNN's training steps (PyTorch)...\n");
    if (access("/dev/nvidiactl", F_OK) == 0)
      if (auto ms = cnn_step_ms(script, {}, steps))
        all.push_back({"cnn_step", 0, "native", *ms, "ms", ""});
    for (const std::string& t : transports)
      if (auto ms =
              cnn_step_ms(script, {{"LD_LIBRARY_PATH", lib_dir}, {"RGPU_TRANSPORT", t}}, steps))
        all.push_back({"cnn_step", 0, "rgpu", *ms, "ms", t});
  } else if (!script.empty()) {
    notes.push_back("CNN step: skipped, python3 cannot import torch");
  }

  StartupRun st;  // start-up and small-call rows (cli/bench_startup.cc)
  if (startup)
    st = bench_startup(exe_dir, lib_dir, access("/dev/nvidiactl", F_OK) == 0, transports);
  for (auto& sr : st.rows) all.push_back({sr.op, 0, sr.mode, sr.value, sr.unit, sr.transport});

  // The table.
  printf("\nrgpu bench — %s%s%s\n", device_rgpu.empty() ? "?" : device_rgpu.c_str(),
         device_native.empty() ? "" : "; native: ", device_native.c_str());
  printf("%-14s %8s %12s %12s %12s %12s %8s %8s %8s\n", "operation", "bytes", "native", "rgpu tcp",
         "rgpu shm", "raw link", "tcp/nat", "shm/nat", "tcp/link");
  auto row = [&](const std::string& label, const std::string& op, uint64_t bytes,
                 const std::string& link_op) {
    const Result* n = find(all, op, bytes, "native");
    const Result* g = find(all, op, bytes, "rgpu", "tcp");
    const Result* m = find(all, op, bytes, "rgpu", "shm");
    const Result* l = find(all, link_op, bytes, "link");
    printf("%-14s %8s %12s %12s %12s %12s %8s %8s %8s\n", label.c_str(),
           bytes ? human(bytes).c_str() : "-", cell(n).c_str(), cell(g).c_str(), cell(m).c_str(),
           cell(l).c_str(), ratio(g, n).c_str(), ratio(m, n).c_str(), ratio(g, l).c_str());
  };
  row("sync call", "sync_call", 0, "sync_call");
  for (auto& p : all)
    if (p.op == "ping")
      printf("%-14s %8s %12s %12s %12s %12s   (rgpu's round trip without GPU work)\n", "ping", "-",
             "-", p.transport == "tcp" ? cell(&p).c_str() : "-",
             p.transport == "shm" ? cell(&p).c_str() : "-",
             cell(find(all, "sync_call", 0, "link")).c_str());
  row("launch rate", "launch_rate", 0, "");
  row("graph launches", "graph_launch_rate", 0, "");
  row("graph replay", "graph_replay", 0, "");
  row("same on stream", "stream_replay", 0, "");
  for (uint64_t b : kAllocSizes) row("malloc+free/s", "alloc_rate", b, "");
  if (find(all, "cnn_step", 0, "rgpu", "tcp")) row("CNN step (time)", "cnn_step", 0, "");
  for (const char* op : {"h2d_pinned", "d2h_pinned", "h2d_pageable", "d2h_pageable"})
    for (uint64_t b = 4; b <= max_bytes; b *= 16) row(op, op, b, "stream");
  for (auto& n : notes) printf("note: %s\n", n.c_str());
  if (!tls_server.empty()) print_tls_rows(all, tls_server, max_bytes);
  print_graph_summary(all);
  if (startup) print_startup_rows(st);
  if (!emu.empty()) print_emu_rows(emu, max_bytes, all);

  print_targets(all, max_bytes, startup ? &st : nullptr);  // cli/bench_targets.cc
  if (!json.empty() && !write_json(json, all)) {
    fprintf(stderr, "rgpu bench: cannot write %s\n", json.c_str());
    return 1;
  }
  if (!plot.empty()) {
    std::string tmp = json.empty() ? plot + ".json" : json;
    if (json.empty()) write_json(tmp, all);
    bool ok = write_plot(tmp, plot, "rgpu bench: " + device_rgpu);
    if (json.empty()) unlink(tmp.c_str());
    if (!ok) return 1;
  }
  if (!tls_server.empty() && !find(all, "sync_call", 0, "rgpu", "tls")) return 1;
  if (!st.ok) return 1;
  return find(all, "sync_call", 0, "rgpu", "tcp") ? 0 : 1;
}

std::string cell(const Result* r) {
  if (!r) return "-";
  char s[32];
  if (r->unit == "launches/s")
    snprintf(s, sizeof s, "%.0f/s", r->value);
  else
    snprintf(s, sizeof s, "%.3g %s", r->value, r->unit.c_str());
  return s;
}

std::string ratio(const Result* a, const Result* b) {
  if (!a || !b || b->value == 0) return "-";
  char s[16];
  snprintf(s, sizeof s, "%.2f", a->value / b->value);
  return s;
}

std::string human(uint64_t b) {
  const char* units[] = {"B", "KiB", "MiB", "GiB"};
  int u = 0;
  double v = static_cast<double>(b);
  while (v >= 1024 && u < 3) v /= 1024, ++u;
  char s[32];
  snprintf(s, sizeof s, "%g %s", v, units[u]);
  return s;
}

const Result* find(const std::vector<Result>& rs, const std::string& op, uint64_t bytes,
                   const std::string& mode, const std::string& transport) {
  for (auto& r : rs)
    if (r.op == op && r.bytes == bytes && r.mode == mode && r.transport == transport) return &r;
  return nullptr;
}

}  // namespace rgpu::cli
