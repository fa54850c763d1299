// RGPU_NET_EMU: its grammar, this process's setting, the hello's announcement of it, and which
// TCP connections get the delay line (emu_connection.cc).
#include "transport/tcp/net_emu.h"

#include <atomic>
#include <cctype>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "common/log.h"

namespace rgpu::transport {
namespace {

constexpr uint64_t kMaxRttNs = 10'000'000'000ull;  // 10 s: beyond that, a typo
constexpr double kMaxGbps = 100'000;

std::string trim(const std::string& s) {
  size_t b = s.find_first_not_of(" \t"), e = s.find_last_not_of(" \t");
  return b == std::string::npos ? "" : s.substr(b, e - b + 1);
}

// A non-negative finite number at the start of `s`; `rest` what follows it.
std::optional<double> number(const std::string& s, std::string& rest) {
  if (s.empty() || !(isdigit(static_cast<unsigned char>(s[0])) || s[0] == '.')) return std::nullopt;
  errno = 0;
  char* end = nullptr;
  double v = strtod(s.c_str(), &end);
  if (errno || end == s.c_str() || !std::isfinite(v) || v < 0) return std::nullopt;
  rest = end;
  return v;
}

// Set by a NetEmuScope; read at every connection's creation.
std::atomic<const NetEmu*> g_scope{nullptr};

}  // namespace

std::string NetEmu::spec() const {
  std::string out;
  if (rtt_ns) {
    char b[48];
    if (rtt_ns % 1'000'000 == 0)
      snprintf(b, sizeof b, "rtt=%llums", static_cast<unsigned long long>(rtt_ns / 1'000'000));
    else if (rtt_ns % 1000 == 0)
      snprintf(b, sizeof b, "rtt=%lluus", static_cast<unsigned long long>(rtt_ns / 1000));
    else
      snprintf(b, sizeof b, "rtt=%lluns", static_cast<unsigned long long>(rtt_ns));
    out = b;
  }
  if (gbps > 0) {
    char b[48];
    snprintf(b, sizeof b, "gbps=%g", gbps);
    if (!out.empty()) out += ',';  // piecewise: GCC 12's -Wrestrict misfires on "," + string
    out += b;
  }
  return out.empty() ? "off" : out;
}

std::optional<NetEmu> parse_net_emu(const std::string& spec, std::string& error) {
  NetEmu emu;
  if (trim(spec).empty()) return emu;
  bool seen_rtt = false, seen_gbps = false;
  size_t pos = 0;
  for (;;) {
    size_t comma = spec.find(',', pos);
    const std::string part =
        trim(spec.substr(pos, comma == std::string::npos ? std::string::npos : comma - pos));
    const size_t eq = part.find('=');
    const std::string key = trim(part.substr(0, eq)),
                      value = eq == std::string::npos ? "" : trim(part.substr(eq + 1));
    std::string rest;
    if (part.empty()) {
      error = "an empty item (items are separated by one comma)";
      return std::nullopt;
    } else if (key == "rtt") {
      auto v = number(value, rest);
      double scale = rest == "ns" ? 1 : rest == "us" ? 1e3 : rest == "ms" ? 1e6 : 0;
      if (!v || scale == 0) {
        error = "\"" + part + "\" (rtt takes a number and ns, us or ms: rtt=25us)";
        return std::nullopt;
      }
      if (seen_rtt) {
        error = "\"" + part + "\" (rtt given twice)";
        return std::nullopt;
      }
      if (*v * scale > static_cast<double>(kMaxRttNs)) {
        error = "\"" + part + "\" (rtt above 10 s)";
        return std::nullopt;
      }
      emu.rtt_ns = static_cast<uint64_t>(std::llround(*v * scale));
      seen_rtt = true;
    } else if (key == "gbps") {
      auto v = number(value, rest);
      if (!v || !rest.empty() || *v <= 0 || *v > kMaxGbps) {
        error = "\"" + part + "\" (gbps takes a number above 0 and up to 100000: gbps=100)";
        return std::nullopt;
      }
      if (seen_gbps) {
        error = "\"" + part + "\" (gbps given twice)";
        return std::nullopt;
      }
      emu.gbps = *v;
      seen_gbps = true;
    } else {
      error = "\"" + part + "\" (known: rtt=<n>ns|us|ms and gbps=<x>)";
      return std::nullopt;
    }
    if (comma == std::string::npos) break;
    pos = comma + 1;
  }
  return emu;
}

const NetEmu& process_net_emu() {
  static const NetEmu emu = [] {
    const char* env = getenv("RGPU_NET_EMU");
    if (!env || !*env) return NetEmu{};
    std::string error;
    auto parsed = parse_net_emu(env, error);
    if (!parsed) {
      LOG_ERROR("RGPU_NET_EMU=\"%s\": bad part %s; network emulation is off", env, error.c_str());
      return NetEmu{};
    }
    if (parsed->on())
      LOG_INFO("RGPU_NET_EMU: this process's outgoing TCP traffic is emulated as %s",
               parsed->spec().c_str());
    return *parsed;
  }();
  return emu;
}

std::string net_emu_tag() {
  const NetEmu& e = process_net_emu();
  return e.on() ? " [net-emu " + e.spec() + "]" : "";
}

std::optional<std::string> net_emu_announced(const std::string& info) {
  const std::string open = "[net-emu ";
  size_t b = info.rfind(open);
  if (b == std::string::npos) return std::nullopt;
  size_t e = info.find(']', b);
  if (e == std::string::npos) return std::nullopt;
  return info.substr(b + open.size(), e - b - open.size());
}

std::unique_ptr<Connection> tcp_emulation(std::unique_ptr<Connection> c, bool accepted) {
  if (const NetEmu* scoped = g_scope.load(std::memory_order_acquire))
    return net_emulate(std::move(c), *scoped, true);
  const NetEmu& e = process_net_emu();
  if (!e.on()) return c;
  return net_emulate(std::move(c), e, !accepted);
}

NetEmuScope::NetEmuScope(const NetEmu& emu) : emu_(emu) {
  g_scope.store(emu_.on() ? &emu_ : nullptr, std::memory_order_release);
}
NetEmuScope::~NetEmuScope() { g_scope.store(nullptr, std::memory_order_release); }

}  // namespace rgpu::transport
