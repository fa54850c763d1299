// Network emulation for the TCP transport (RGPU_NET_EMU=rtt=25us,gbps=100): each process delays
// and paces what it sends over TCP, so that loopback measures like a real network.  Each side
// emulates its outgoing direction only: with both sides set, a round trip costs about rtt plus
// twice the serialization, and a stream reaches about gbps whatever the rtt.
//
// Where it applies: every TCP connection this process opens (tcp_connect); on accepted ones only
// once net_emu_activate is called (rgpud does for clients that announce their own emulation in
// the hello, so one rgpud serves emulated and plain clients side by side).  Not emulated: the shm
// transport (shared memory is local by definition) and TLS (it owns the socket itself).
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "transport/connection.h"

namespace rgpu::transport {

struct NetEmu {
  uint64_t rtt_ns = 0;  // round trip; each direction adds rtt_ns / 2
  double gbps = 0;      // sending rate in 10^9 bits per second; 0: not paced
  bool on() const { return rtt_ns > 0 || gbps > 0; }
  // The canonical spec ("rtt=25us,gbps=100"; "off" when neither), parsable again.
  std::string spec() const;
};

// Parses the grammar of RGPU_NET_EMU: comma-separated `rtt=<n>(ns|us|ms)` and `gbps=<x>`, each at
// most once, either absent; "" is no emulation.  On a bad spec: nothing, and `error` names the bad
// part.
std::optional<NetEmu> parse_net_emu(const std::string& spec, std::string& error);

// This process's emulation: RGPU_NET_EMU, parsed on first use.  A bad value is logged once (as an
// error naming the variable and the bad part) and leaves the emulation off.
const NetEmu& process_net_emu();

// What a hello carries to announce this process's emulation: " [net-emu rtt=25us,gbps=100]", or ""
// when off.  Appended to the client's client_info and to rgpud's server_info.
std::string net_emu_tag();
// The spec a hello's info string announces (net_emu_tag), if any.
std::optional<std::string> net_emu_announced(const std::string& info);

// Wraps `c` (a TCP connection) in the emulation `emu`; `active` false leaves it passing bytes
// straight through until net_emu_activate.
std::unique_ptr<Connection> net_emulate(std::unique_ptr<Connection> c, const NetEmu& emu,
                                        bool active = true);
// Starts emulating an accepted connection that net_emulate wrapped inactive; false (and nothing
// done) for any other connection.  Call it before the first send that should be emulated, while
// no other thread sends on it.
bool net_emu_activate(Connection& c);

// The TCP transport's hook: `c` as the process's emulation (or a NetEmuScope) wants it, unchanged
// when off (no cost beyond this call).  `accepted`: a connection a listener took.
std::unique_ptr<Connection> tcp_emulation(std::unique_ptr<Connection> c, bool accepted);

// While it lives, TCP connections this process opens or accepts are emulated as `emu` says (both
// ends active), whatever RGPU_NET_EMU says: rgpu bench's raw link under emulation.  One at a time.
class NetEmuScope {
 public:
  explicit NetEmuScope(const NetEmu& emu);
  ~NetEmuScope();
  NetEmuScope(const NetEmuScope&) = delete;
  NetEmuScope& operator=(const NetEmuScope&) = delete;

 private:
  NetEmu emu_;
};

}  // namespace rgpu::transport
