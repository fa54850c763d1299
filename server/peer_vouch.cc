#include "server/peer_vouch.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>

#include "common/strings.h"
#include "proto/auth.h"
#include "server/ipc_exports.h"
#include "server/peer_ipc.h"

namespace rgpu::server {

using namespace rgpu::proto;

namespace {

std::string with_port(const std::string& host, uint16_t port) {
  const bool v6 = host.find(':') != std::string::npos;
  return (v6 ? "[" + host + "]" : host) + ":" + std::to_string(port);
}

// A folder of this user's that nobody else may write to (made, mode 0700, when missing).
bool private_dir(const std::string& dir, std::string& error) {
  for (size_t at = 1; at <= dir.size(); ++at) {
    if (at != dir.size() && dir[at] != '/') continue;
    const std::string part = dir.substr(0, at);
    if (mkdir(part.c_str(), 0700) != 0 && errno != EEXIST) {
      error = "cannot make " + part + ": " + strerror(errno);
      return false;
    }
  }
  struct stat st;
  if (lstat(dir.c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) {
    error = dir + " is not a folder";
    return false;
  }
  if (st.st_uid != geteuid() || (st.st_mode & (S_IWGRP | S_IWOTH))) {
    error = dir + " belongs to another user or others may write to it";
    return false;
  }
  return true;
}

// Makes `path` with a fresh random key unless it exists (another rgpud may be making it at the
// same moment: the file appears whole, by link(2), or not at all).
bool make_key_file(const std::string& path, std::string& error) {
  const std::string dir = path.substr(0, path.rfind('/'));
  if (!private_dir(dir, error)) return false;
  if (access(path.c_str(), F_OK) == 0) return true;
  uint8_t raw[32];
  random_bytes(raw, sizeof raw);
  const std::string text = hex(raw, sizeof raw) + "\n";
  const std::string tmp = path + ".tmp" + std::to_string(getpid());
  int fd = open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
  if (fd < 0) {
    error = "cannot make " + tmp + ": " + strerror(errno);
    return false;
  }
  const bool written = write(fd, text.data(), text.size()) == static_cast<ssize_t>(text.size());
  close(fd);
  const bool linked = written && (link(tmp.c_str(), path.c_str()) == 0 || errno == EEXIST);
  if (!linked) error = "cannot write " + path + ": " + strerror(errno);
  unlink(tmp.c_str());
  return linked;
}

bool numeric_address(const std::string& host, in6_addr& a6, bool& v4, in_addr& a4) {
  v4 = inet_pton(AF_INET, host.c_str(), &a4) == 1;
  return v4 || inet_pton(AF_INET6, host.c_str(), &a6) == 1;
}

}  // namespace

std::string default_peer_key_file() {
  if (const char* x = getenv("XDG_CONFIG_HOME"); x && *x) return std::string(x) + "/rgpud/peer-key";
  if (const char* h = getenv("HOME"); h && *h) return std::string(h) + "/.config/rgpud/peer-key";
  return "/tmp/rgpud-" + std::to_string(geteuid()) + "/peer-key";
}

std::optional<std::string> load_peer_key(const std::string& path, bool create, std::string& error) {
  if (create && !make_key_file(path, error)) return std::nullopt;
  auto key = read_token_file(path, error);
  if (!key) return std::nullopt;
  struct stat st;
  if (stat(path.c_str(), &st) != 0 || st.st_uid != geteuid()) {
    error = "peer key file " + path + " belongs to another user";
    return std::nullopt;
  }
  return key;
}

std::string peer_own_endpoint(const transport::Connection& conn, const std::string& listen,
                              std::string& why) {
  sockaddr_storage ss{};
  socklen_t len = sizeof ss;
  char text[INET6_ADDRSTRLEN] = {};
  if (conn.fd() >= 0 && getsockname(conn.fd(), reinterpret_cast<sockaddr*>(&ss), &len) == 0) {
    if (ss.ss_family == AF_INET) {
      auto* in = reinterpret_cast<sockaddr_in*>(&ss);
      inet_ntop(AF_INET, &in->sin_addr, text, sizeof text);
      return with_port(text, ntohs(in->sin_port));
    }
    if (ss.ss_family == AF_INET6) {
      auto* in6 = reinterpret_cast<sockaddr_in6*>(&ss);
      if (IN6_IS_ADDR_V4MAPPED(&in6->sin6_addr))
        inet_ntop(AF_INET, &in6->sin6_addr.s6_addr[12], text, sizeof text);
      else
        inet_ntop(AF_INET6, &in6->sin6_addr, text, sizeof text);
      return with_port(text, ntohs(in6->sin6_port));
    }
  }
  auto hp = parse_host_port(listen, 0);
  if (!hp || hp->port == 0) {
    why = "this rgpud has no TCP listener another rgpud could reach";
    return "";
  }
  if (hp->host == "0.0.0.0") hp->host = "127.0.0.1";
  if (hp->host == "::") hp->host = "::1";
  return with_port(hp->host, hp->port);
}

uint64_t peer_wall_ms() {
  return static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::milliseconds>(
                                   std::chrono::system_clock::now().time_since_epoch())
                                   .count());
}

std::string peer_check_voucher(const PeerKey* key, const std::string& no_key,
                               const PeerVoucher& v) {
  if (!key) return "this rgpud has no peer key (" + no_key + ")";
  if (!peer_voucher_verify(*key, v))
    return "the ticket's endpoint is not vouched for by an rgpud that holds this rgpud's peer key "
           "(a ticket forged or altered by the client, or the two rgpuds were given different "
           "--peer-key-file)";
  auto hp = parse_host_port(v.endpoint, 0);
  in6_addr a6{};
  in_addr a4{};
  bool v4 = false;
  if (!hp || hp->port == 0 || !numeric_address(hp->host, a6, v4, a4))
    return "the ticket's endpoint is not a numeric address and port";
  const uint32_t h4 = ntohl(a4.s_addr);
  if (v4 ? (h4 == 0 || h4 == 0xffffffffu || (h4 >> 28) == 0xe)
         : (IN6_IS_ADDR_UNSPECIFIED(&a6) || IN6_IS_ADDR_MULTICAST(&a6) ||
            IN6_IS_ADDR_LINKLOCAL(&a6) || IN6_IS_ADDR_V4MAPPED(&a6)))
    return "the ticket's endpoint is no address an rgpud listens at";
  if (peer_wall_ms() > v.not_after_ms + kPeerClockSlackMs)
    return "the ticket expired (or the two rgpuds' clocks differ by more than 5 minutes)";
  const bool loopback = v4 ? (h4 >> 24) == 127 : IN6_IS_ADDR_LOOPBACK(&a6);
  if (loopback && (v.machine.empty() || v.machine != peer_machine_id()))
    return "the ticket names a loopback address of another machine (its client reached that "
           "rgpud on its own machine; this one cannot)";
  return "";
}

}  // namespace rgpu::server
