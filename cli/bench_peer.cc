// rgpu bench --peer: copies between GPUs of two servers (devices 0 and 1 of RGPU_SERVERS), in one
// run: cudaMemcpyPeer (server to server), the relay through this client (device 0 -> host ->
// device 1), and the raw link (a TCP stream between two processes to the second server's address,
// when that address is on this machine), and native cudaMemcpyPeer when this machine has two GPUs.
#include "cli/bench_peer.h"

#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "cli/bench.h"
#include "client/config.h"
#include "transport/tcp/tcp.h"

namespace rgpu::cli {
namespace {

using Clock = std::chrono::steady_clock;

struct Row {
  double gbs = 0, us = 0;  // 0: not measured
};
using Rows = std::map<uint64_t, Row>;  // by bytes

// The worker through rgpu; fills `peer` and `relay`; `unsupported` when the servers refused the
// peer copy.  False when the run failed.
// `native`: without rgpu; on a machine with one GPU the worker then copies within it.
bool run_worker(const std::string& worker, const char* lib_dir, uint64_t max_bytes, Rows& peer,
                Rows& relay, bool& unsupported, std::string& device, bool native = false) {
  int out[2];
  if (pipe(out) != 0) return false;
  pid_t pid = fork();
  if (pid == 0) {
    dup2(out[1], 1);
    close(out[0]);
    close(out[1]);
    setenv("LD_LIBRARY_PATH", lib_dir, 1);
    if (native) setenv("RGPU_BENCH_PEER_ONE_GPU", "1", 1);
    std::string arg = std::to_string(max_bytes);
    execl(worker.c_str(), worker.c_str(), "--peer", arg.c_str(), static_cast<char*>(nullptr));
    fprintf(stderr, "rgpu bench: cannot run %s: %s\n", worker.c_str(), strerror(errno));
    _exit(127);
  }
  close(out[1]);
  FILE* f = fdopen(out[0], "r");
  char line[512];
  while (f && fgets(line, sizeof line, f)) {
    char op[64], unit[32];
    unsigned long long bytes;
    double value;
    if (sscanf(line, "RESULT %63s %llu %lf %31s", op, &bytes, &value, unit) == 4) {
      std::string o = op;
      Rows& rows = o.rfind("peer_copy", 0) == 0 ? peer : relay;
      (o.size() > 4 && o.compare(o.size() - 4, 4, "_lat") == 0 ? rows[bytes].us : rows[bytes].gbs) =
          value;
    } else if (strncmp(line, "UNSUPPORTED peer_copy", 21) == 0) {
      unsupported = true;
    } else if (strncmp(line, "DEVICE ", 7) == 0) {
      device = std::string(line + 7, strcspn(line + 7, "\n"));
    }
  }
  if (f) fclose(f);
  int st = 0;
  waitpid(pid, &st, 0);
  if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) {
    fprintf(stderr, "rgpu bench: the cross-server run failed (status %d)\n", st);
    return false;
  }
  return true;
}

// The raw link: a child process listens on `host` (which must be an address of this machine: a
// listener cannot bind elsewhere) and this one streams to it.  Each transfer is `bytes` across
// then a one-byte acknowledgement, as a copy's whole time.
bool measure_link(const std::string& host, uint64_t max_bytes, Rows& link, std::string& why) {
  std::unique_ptr<transport::Listener> listener;
  try {
    listener = transport::tcp_listen(host, 0);
  } catch (const std::exception& e) {
    why = "cannot listen on " + host + " (" + e.what() + "): not an address of this machine";
    return false;
  }
  const uint16_t port = listener->port();
  pid_t pid = fork();
  if (pid == 0) {
    int rc = 0;
    try {
      std::unique_ptr<transport::Connection> c;
      while (!c) c = listener->accept();  // nullptr: interrupted
      std::vector<char> buf(max_bytes);
      for (;;) {
        uint64_t n = 0;
        c->recv(&n, sizeof n);
        if (n == 0 || n > max_bytes) break;
        c->recv(buf.data(), n);
        c->send("k", 1);
      }
    } catch (...) {
      rc = 1;
    }
    _exit(rc);
  }
  listener.reset();
  bool ok = true;
  try {
    auto c = transport::tcp_connect(host, port, 10);
    std::vector<char> src(max_bytes, 1);
    for (uint64_t bytes = 4; bytes <= max_bytes; bytes *= 4) {
      std::vector<double> each;
      auto transfer = [&] {
        auto t0 = Clock::now();
        c->send(&bytes, sizeof bytes);
        c->send(src.data(), bytes);
        char k;
        c->recv(&k, 1);
        each.push_back(std::chrono::duration<double, std::micro>(Clock::now() - t0).count());
      };
      transfer();
      double one = std::max(each.back() / 1e6, 1e-7);
      int reps = static_cast<int>(std::min(2000.0, std::max(3.0, 0.25 / one)));
      each.clear();
      auto t0 = Clock::now();
      for (int r = 0; r < reps; ++r) transfer();
      double s = std::chrono::duration<double>(Clock::now() - t0).count();
      link[bytes].gbs = bytes * reps / s / 1e9;
      if (bytes <= (64u << 10)) {
        std::sort(each.begin(), each.end());
        link[bytes].us = each[each.size() / 2];
      }
    }
    uint64_t end = 0;
    c->send(&end, sizeof end);
  } catch (const std::exception& e) {
    why = std::string("raw TCP stream to ") + host + " failed: " + e.what();
    ok = false;
  }
  int st = 0;
  waitpid(pid, &st, 0);
  return ok;
}

std::string gbs(const Rows& r, uint64_t b) {
  auto it = r.find(b);
  if (it == r.end() || it->second.gbs == 0) return "-";
  char s[32];
  snprintf(s, sizeof s, "%.3g GB/s", it->second.gbs);
  return s;
}
std::string us(const Rows& r, uint64_t b) {
  auto it = r.find(b);
  if (it == r.end() || it->second.us == 0) return "-";
  char s[32];
  snprintf(s, sizeof s, "%.3g us", it->second.us);
  return s;
}
// a / b, of bandwidths (`lat`: of times).
std::string ratio(const Rows& a, const Rows& b, uint64_t bytes, bool lat) {
  auto x = a.find(bytes), y = b.find(bytes);
  if (x == a.end() || y == b.end()) return "-";
  double p = lat ? x->second.us : x->second.gbs, q = lat ? y->second.us : y->second.gbs;
  if (p == 0 || q == 0) return "-";
  char s[16];
  snprintf(s, sizeof s, "%.2f", p / q);
  return s;
}

// Issue 14's targets, from what this run measured ("-" where it could not judge):
// a 4-byte copy within 2 raw round trips + 10 µs; the largest copy >= 0.9 x the raw link and
// >= 1.8 x the relay; and, where native copies were measured, >= 0.9 x native from 4 MiB.
void print_targets(const Rows& peer, const Rows& relay, const Rows& link, const Rows& native) {
  auto at = [](const Rows& r, uint64_t b, bool lat) {
    auto it = r.find(b);
    return it == r.end() ? 0.0 : lat ? it->second.us : it->second.gbs;
  };
  auto verdict = [](bool ok) { return ok ? "met" : "MISSED"; };
  printf("targets:\n");
  const double p4 = at(peer, 4, true), l4 = at(link, 4, true);
  if (p4 > 0 && l4 > 0)
    printf("  4-byte copy %.1f us <= 2 x raw round trip + 10 = %.1f us: %s\n", p4, 2 * l4 + 10,
           verdict(p4 <= 2 * l4 + 10));
  if (!peer.empty()) {
    const uint64_t big = peer.rbegin()->first;
    const double pb = at(peer, big, false), lb = at(link, big, false), rb = at(relay, big, false);
    if (pb > 0 && lb > 0)
      printf("  %s: peer/link %.2f >= 0.9: %s\n", human(big).c_str(), pb / lb,
             verdict(pb >= 0.9 * lb));
    if (pb > 0 && rb > 0)
      printf("  %s: peer/relay %.2f >= 1.8: %s\n", human(big).c_str(), pb / rb,
             verdict(pb >= 1.8 * rb));
  }
  double worst = 0;
  uint64_t worst_at = 0;
  for (const auto& [b, row] : peer) {
    const double n = at(native, b, false);
    if (b < (4u << 20) || row.gbs == 0 || n == 0) continue;
    if (worst_at == 0 || row.gbs / n < worst) worst = row.gbs / n, worst_at = b;
  }
  if (worst_at)
    printf("  from 4 MiB: peer/native >= 0.9 (lowest %.2f at %s): %s\n", worst,
           human(worst_at).c_str(), verdict(worst >= 0.9));
}

void write_json(const std::string& path, const std::map<std::string, const Rows*>& all) {
  std::ofstream out(path);
  out << "[\n";
  bool first = true;
  for (auto& [mode, rows] : all)
    for (auto& [bytes, r] : *rows)
      for (int lat = 0; lat < 2; ++lat) {
        double v = lat ? r.us : r.gbs;
        if (v == 0) continue;
        out << (first ? "" : ",\n") << "  {\"op\": \"" << (lat ? "cross_lat" : "cross")
            << "\", \"bytes\": " << bytes << ", \"mode\": \"" << mode << "\", \"value\": " << v
            << ", \"unit\": \"" << (lat ? "us" : "GB/s") << "\"}";
        first = false;
      }
  out << "\n]\n";
}

}  // namespace

int bench_peer(const std::string& worker, const char* lib_dir, uint64_t max_bytes,
               const std::string& json) {
  const char* servers = getenv("RGPU_SERVERS");
  std::vector<std::string> errors;
  auto devices = client::parse_servers(servers ? servers : "", errors);
  if (devices.size() < 2 ||
      (devices[0].host == devices[1].host && devices[0].port == devices[1].port)) {
    fprintf(stderr,
            "rgpu bench --peer: needs devices 0 and 1 on two servers, e.g. "
            "RGPU_SERVERS=hostA:7766/0,hostB:7766/0 (on one machine with two GPUs: rgpud --gpus 0 "
            "--listen :7766 and rgpud --gpus 1 --listen :7767)\n");
    return 2;
  }
  Rows peer, relay, link;
  bool unsupported = false;
  std::string device, link_why;
  fprintf(stderr, "rgpu bench --peer: %s -> %s through rgpu...\n", devices[0].text.c_str(),
          devices[1].text.c_str());
  const bool worker_ok = run_worker(worker, lib_dir, max_bytes, peer, relay, unsupported, device);
  // Native cudaMemcpyPeer between this machine's GPUs 0 and 1 (peer access enabled where the
  // GPUs allow it): the reference for daemons on one machine.  With one GPU, native copies stay
  // within it (RGPU_BENCH_PEER_ONE_GPU): the reference for daemons that share that GPU.
  Rows native, native_relay;
  std::string native_device;
  if (access("/dev/nvidiactl", F_OK) == 0) {
    fprintf(stderr, "rgpu bench --peer: native cudaMemcpyPeer (this machine's GPUs 0 and 1)...\n");
    const char* root = getenv("RGPU_CUDA_ROOT");
    const std::string native_lib = std::string(root ? root : "/usr/local/cuda") + "/lib64";
    bool native_unsupported = false;
    if (!run_worker(worker, native_lib.c_str(), max_bytes, native, native_relay, native_unsupported,
                    native_device, true))
      native.clear();
  }
  fprintf(stderr, "rgpu bench --peer: raw TCP stream to %s...\n", devices[1].host.c_str());
  const bool link_ok = measure_link(devices[1].host, max_bytes, link, link_why);

  printf("\nrgpu bench --peer — %s -> %s (%s)\n", devices[0].text.c_str(), devices[1].text.c_str(),
         device.empty() ? "?" : device.c_str());
  if (!native.empty()) printf("native peer: %s\n", native_device.c_str());
  printf("bandwidth:\n%-9s %14s %14s %14s %14s %11s %10s %11s %12s\n", "bytes", "peer copy",
         "relay (client)", "raw link", "native peer", "peer/relay", "peer/link", "relay/link",
         "peer/native");
  for (uint64_t b = 4; b <= max_bytes; b *= 4)
    printf("%-9s %14s %14s %14s %14s %11s %10s %11s %12s\n", human(b).c_str(),
           unsupported ? "not supported" : gbs(peer, b).c_str(), gbs(relay, b).c_str(),
           gbs(link, b).c_str(), gbs(native, b).c_str(), ratio(peer, relay, b, false).c_str(),
           ratio(peer, link, b, false).c_str(), ratio(relay, link, b, false).c_str(),
           ratio(peer, native, b, false).c_str());
  printf("latency (one copy, median):\n%-9s %14s %14s %14s %14s %11s %10s %11s %12s\n", "bytes",
         "peer copy", "relay (client)", "raw link", "native peer", "peer/relay", "peer/link",
         "relay/link", "peer/native");
  for (uint64_t b = 4; b <= max_bytes && b <= (64u << 10); b *= 4)
    printf("%-9s %14s %14s %14s %14s %11s %10s %11s %12s\n", human(b).c_str(),
           unsupported ? "not supported" : us(peer, b).c_str(), us(relay, b).c_str(),
           us(link, b).c_str(), us(native, b).c_str(), ratio(peer, relay, b, true).c_str(),
           ratio(peer, link, b, true).c_str(), ratio(relay, link, b, true).c_str(),
           ratio(peer, native, b, true).c_str());
  if (!unsupported) print_targets(peer, relay, link, native);
  if (unsupported)
    printf("note: peer copy: not supported by these servers (cudaErrorNotSupported)\n");
  if (!link_ok) printf("note: raw link: %s\n", link_why.c_str());
  if (!json.empty())
    write_json(json, {{"peer", &peer}, {"relay", &relay}, {"link", &link}, {"native", &native}});
  // The relay must work, and the raw link wherever it could be measured (an address of this
  // machine); the peer copy may be unsupported.
  const bool link_local = link_why.empty() || link_why.rfind("cannot listen", 0) != 0;
  if (!worker_ok || relay.empty()) return 1;
  if (link_local && (!link_ok || link.empty())) return 1;
  return 0;
}

}  // namespace rgpu::cli
