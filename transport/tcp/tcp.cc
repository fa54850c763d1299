#include "transport/tcp/tcp.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <vector>

#include "transport/tcp/net_emu.h"

namespace rgpu::transport {
namespace {

constexpr int kSocketBuffer = 8 << 20;

std::string errno_text(int e) { return strerror(e); }

void tune_socket(int fd) {
  int one = 1;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  int buf = kSocketBuffer;
  setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &buf, sizeof buf);
  setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &buf, sizeof buf);
  // A peer whose host vanished while the connection is idle is noticed within about 16 s.
  setsockopt(fd, SOL_SOCKET, SO_KEEPALIVE, &one, sizeof one);
  int idle = 10, intvl = 2, cnt = 3;
  setsockopt(fd, IPPROTO_TCP, TCP_KEEPIDLE, &idle, sizeof idle);
  setsockopt(fd, IPPROTO_TCP, TCP_KEEPINTVL, &intvl, sizeof intvl);
  setsockopt(fd, IPPROTO_TCP, TCP_KEEPCNT, &cnt, sizeof cnt);
}

std::string sockaddr_text(const sockaddr* sa) {
  char host[INET6_ADDRSTRLEN] = "?";
  uint16_t port = 0;
  if (sa->sa_family == AF_INET) {
    auto* in = reinterpret_cast<const sockaddr_in*>(sa);
    inet_ntop(AF_INET, &in->sin_addr, host, sizeof host);
    port = ntohs(in->sin_port);
    return std::string(host) + ":" + std::to_string(port);
  }
  if (sa->sa_family == AF_INET6) {
    auto* in6 = reinterpret_cast<const sockaddr_in6*>(sa);
    inet_ntop(AF_INET6, &in6->sin6_addr, host, sizeof host);
    port = ntohs(in6->sin6_port);
    // Appended piecewise: GCC 12's -Wrestrict misfires on "[" + std::string(...) at -O3.
    std::string out = "[";
    out += host;
    out += "]:";
    out += std::to_string(port);
    return out;
  }
  return "?";
}

bool sockaddr_is_loopback(const sockaddr* sa) {
  if (sa->sa_family == AF_INET) {
    auto* in = reinterpret_cast<const sockaddr_in*>(sa);
    return (ntohl(in->sin_addr.s_addr) >> 24) == 127;
  }
  if (sa->sa_family == AF_INET6) {
    auto* in6 = reinterpret_cast<const sockaddr_in6*>(sa);
    if (IN6_IS_ADDR_LOOPBACK(&in6->sin6_addr)) return true;
    if (IN6_IS_ADDR_V4MAPPED(&in6->sin6_addr)) return in6->sin6_addr.s6_addr[12] == 127;
  }
  return false;
}

class TcpConnection final : public Connection {
 public:
  TcpConnection(int fd, std::string peer) : fd_(fd), peer_(std::move(peer)) {}
  ~TcpConnection() override { ::close(fd_); }

  void send_all(const iovec* iov, int count) override {
    std::vector<iovec> v(iov, iov + count);
    size_t i = 0;
    while (i < v.size()) {
      if (v[i].iov_len == 0) {
        ++i;
        continue;
      }
      msghdr msg{};
      msg.msg_iov = &v[i];
      msg.msg_iovlen = std::min<size_t>(v.size() - i, IOV_MAX);
      ssize_t n = ::sendmsg(fd_, &msg, MSG_NOSIGNAL);
      if (n < 0) {
        if (errno == EINTR) continue;
        int e = errno;
        if (e == EAGAIN || e == EWOULDBLOCK)
          throw TransportError("send to " + peer_ + " made no progress for " +
                                   std::to_string(send_timeout_s_) + " s (the peer is not reading)",
                               false, true);
        if (e == ETIMEDOUT)
          throw TransportError("send to " + peer_ + " failed: the peer took no data for " +
                                   std::to_string(send_timeout_s_) +
                                   " s (it stopped reading, or the network is lost)",
                               false, true);
        throw TransportError("send to " + peer_ + " failed: " + errno_text(e),
                             e == EPIPE || e == ECONNRESET);
      }
      advance(v, i, static_cast<size_t>(n));
    }
  }

  // Small reads (frame headers and bodies) are served from a buffer filled by one recv of
  // whatever has arrived, so a header and its body cost one system call; large reads go straight
  // into the caller's memory once the buffer is empty.
  void recv_all(const iovec* iov, int count) override {
    for (int k = 0; k < count; ++k) {
      char* p = static_cast<char*>(iov[k].iov_base);
      size_t left = iov[k].iov_len;
      while (left) {
        if (rpos_ < rend_) {
          size_t n = std::min(left, rend_ - rpos_);
          memcpy(p, rbuf_.data() + rpos_, n);
          rpos_ += n, p += n, left -= n;
        } else if (left >= kDirect) {
          ssize_t n = ::recv(fd_, p, left, MSG_WAITALL);
          if (n < 0 && errno == EINTR) continue;
          if (n <= 0) fail_recv(n, false);
          p += n, left -= static_cast<size_t>(n);
        } else if (!fill()) {
          throw TransportError("connection to " + peer_ + " closed by peer", true);
        }
      }
    }
  }

  bool recv_or_eof(void* buf, size_t len) override { return recv_first(buf, len, false); }
  bool recv_idle_or_eof(void* buf, size_t len) override { return recv_first(buf, len, true); }

  std::string peer() const override { return peer_; }
  void shutdown() override { ::shutdown(fd_, SHUT_RDWR); }
  int fd() const override { return fd_; }
  void set_recv_timeout(int seconds) override {
    recv_timeout_s_ = seconds;
    timeval tv{seconds, 0};
    setsockopt(fd_, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  }
  void set_send_timeout(int seconds) override {
    send_timeout_s_ = seconds;
    timeval tv{seconds, 0};
    setsockopt(fd_, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
    unsigned ms = static_cast<unsigned>(seconds) * 1000u;
    setsockopt(fd_, IPPROTO_TCP, TCP_USER_TIMEOUT, &ms, sizeof ms);
  }
  const char* kind() const override { return "tcp"; }
  Capabilities capabilities() const override {
    Capabilities c;
    c.tls_wraps = true;
    return c;
  }

 private:
  static constexpr size_t kBuffer = 64 << 10, kDirect = 16 << 10;

  // recv_or_eof; `idle`: the wait for the first byte outlasts the receive timeout.
  bool recv_first(void* buf, size_t len, bool idle) {
    if (rpos_ == rend_ && len) {
      if (!fill(idle)) return false;
    }
    iovec v{buf, len};
    try {
      recv_all(&v, 1);
    } catch (const TransportError& e) {
      if (e.closed)
        throw TransportError("connection to " + peer_ + " closed in the middle of a message", true);
      throw;
    }
    return true;
  }

  // One recv of whatever has arrived (at least one byte); false at a clean end of stream.
  // `idle`: a receive timeout before the first byte is not an error (wait on).
  bool fill(bool idle = false) {
    if (rbuf_.empty()) rbuf_.resize(kBuffer);
    for (;;) {
      ssize_t n = ::recv(fd_, rbuf_.data(), rbuf_.size(), 0);
      if (n > 0) {
        rpos_ = 0;
        rend_ = static_cast<size_t>(n);
        return true;
      }
      if (n == 0) return false;
      if (errno == EINTR || (idle && (errno == EAGAIN || errno == EWOULDBLOCK))) continue;
      if (errno == ECONNRESET) return false;
      fail_recv(n, false);
    }
  }
  [[noreturn]] void fail_recv(ssize_t n, bool /*unused*/) {
    if (n == 0) throw TransportError("connection to " + peer_ + " closed by peer", true);
    int e = errno;
    if (e == EAGAIN || e == EWOULDBLOCK)
      throw TransportError("no data from " + peer_ + " for " + std::to_string(recv_timeout_s_) +
                               " s in the middle of a message",
                           false, true);
    throw TransportError("receive from " + peer_ + " failed: " + errno_text(e),
                         e == ECONNRESET || e == ETIMEDOUT, e == ETIMEDOUT);
  }
  static void advance(std::vector<iovec>& v, size_t& i, size_t n) {
    while (n > 0 && i < v.size()) {
      if (n >= v[i].iov_len) {
        n -= v[i].iov_len;
        v[i].iov_len = 0;
        ++i;
      } else {
        v[i].iov_base = static_cast<char*>(v[i].iov_base) + n;
        v[i].iov_len -= n;
        n = 0;
      }
    }
  }

  int fd_;
  std::string peer_;
  std::vector<char> rbuf_;
  size_t rpos_ = 0, rend_ = 0;
  int recv_timeout_s_ = 0, send_timeout_s_ = 0;
};

class TcpListener final : public Listener {
 public:
  TcpListener(int fd, bool loopback) : fd_(fd), loopback_(loopback) {
    sockaddr_storage ss{};
    socklen_t len = sizeof ss;
    getsockname(fd_, reinterpret_cast<sockaddr*>(&ss), &len);
    address_ = sockaddr_text(reinterpret_cast<sockaddr*>(&ss));
    port_ = ss.ss_family == AF_INET ? ntohs(reinterpret_cast<sockaddr_in*>(&ss)->sin_port)
                                    : ntohs(reinterpret_cast<sockaddr_in6*>(&ss)->sin6_port);
  }
  ~TcpListener() override { ::close(fd_); }

  std::unique_ptr<Connection> accept() override {
    sockaddr_storage ss{};
    socklen_t len = sizeof ss;
    int fd = ::accept4(fd_, reinterpret_cast<sockaddr*>(&ss), &len, SOCK_CLOEXEC);
    if (fd < 0) {
      if (errno == EINTR || errno == ECONNABORTED) return nullptr;
      throw TransportError(std::string("accept failed: ") + errno_text(errno));
    }
    tune_socket(fd);
    return tcp_emulation(
        std::make_unique<TcpConnection>(fd, sockaddr_text(reinterpret_cast<sockaddr*>(&ss))), true);
  }
  int fd() const override { return fd_; }
  uint16_t port() const override { return port_; }
  bool is_loopback() const override { return loopback_; }
  std::string address() const override { return address_; }

 private:
  int fd_;
  bool loopback_;
  uint16_t port_ = 0;
  std::string address_;
};

struct AddrInfo {
  addrinfo* list = nullptr;
  ~AddrInfo() {
    if (list) freeaddrinfo(list);
  }
};

void resolve(const std::string& host, uint16_t port, bool passive, AddrInfo& out) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  if (passive) hints.ai_flags = AI_PASSIVE;
  std::string service = std::to_string(port);
  int rc = getaddrinfo(host.c_str(), service.c_str(), &hints, &out.list);
  if (rc != 0) throw TransportError("cannot resolve " + host + ": " + gai_strerror(rc));
}

// connect(2) that gives up after `timeout_s` (0: the system's own limit).  0 or an errno.
int connect_within(int fd, const sockaddr* addr, socklen_t len, int timeout_s) {
  if (timeout_s <= 0) return ::connect(fd, addr, len) == 0 ? 0 : errno;
  int flags = fcntl(fd, F_GETFL);
  fcntl(fd, F_SETFL, flags | O_NONBLOCK);
  int rc = ::connect(fd, addr, len) == 0 ? 0 : errno;
  if (rc == EINPROGRESS) {
    auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(timeout_s);
    for (;;) {
      auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
          deadline - std::chrono::steady_clock::now());
      pollfd p{fd, POLLOUT, 0};
      int n = left.count() > 0 ? poll(&p, 1, static_cast<int>(left.count())) : 0;
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) {
        rc = ETIMEDOUT;
        break;
      }
      socklen_t sl = sizeof rc;
      if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &rc, &sl) != 0) rc = errno;
      break;
    }
  }
  fcntl(fd, F_SETFL, flags);
  return rc;
}

}  // namespace

std::unique_ptr<Connection> tcp_connect(const std::string& host, uint16_t port, int timeout_s) {
  AddrInfo ai;
  resolve(host, port, false, ai);
  std::string last = "no address";
  for (addrinfo* a = ai.list; a; a = a->ai_next) {
    int fd = ::socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC, a->ai_protocol);
    if (fd < 0) {
      last = errno_text(errno);
      continue;
    }
    tune_socket(fd);
    int rc = connect_within(fd, a->ai_addr, a->ai_addrlen, timeout_s);
    if (rc == 0)
      return tcp_emulation(std::make_unique<TcpConnection>(fd, sockaddr_text(a->ai_addr)), false);
    last = rc == ETIMEDOUT && timeout_s > 0 ? "no answer within " + std::to_string(timeout_s) + " s"
                                            : errno_text(rc);
    ::close(fd);
  }
  throw TransportError("cannot connect to " + host + ":" + std::to_string(port) + ": " + last);
}

std::string tcp_source_key(int fd) {
  sockaddr_storage ss{};
  socklen_t len = sizeof ss;
  char text[INET6_ADDRSTRLEN] = "?";
  if (getpeername(fd, reinterpret_cast<sockaddr*>(&ss), &len) != 0) return "address ?";
  if (ss.ss_family == AF_INET) {
    inet_ntop(AF_INET, &reinterpret_cast<sockaddr_in*>(&ss)->sin_addr, text, sizeof text);
    return std::string("address ") + text;
  }
  if (ss.ss_family != AF_INET6) return "address ?";
  in6_addr a = reinterpret_cast<sockaddr_in6*>(&ss)->sin6_addr;
  if (IN6_IS_ADDR_V4MAPPED(&a)) {
    inet_ntop(AF_INET, a.s6_addr + 12, text, sizeof text);
    return std::string("address ") + text;
  }
  memset(a.s6_addr + 8, 0, 8);  // the interface half: a host picks it freely
  inet_ntop(AF_INET6, &a, text, sizeof text);
  return std::string("address ") + text + "/64";
}

bool tcp_host_is_loopback(const std::string& host) {
  AddrInfo ai;
  resolve(host, 0, true, ai);
  bool any = false;
  for (addrinfo* a = ai.list; a; a = a->ai_next) {
    if (!sockaddr_is_loopback(a->ai_addr)) return false;
    any = true;
  }
  return any;
}

std::unique_ptr<Listener> tcp_listen(const std::string& host, uint16_t port) {
  AddrInfo ai;
  resolve(host, port, true, ai);
  std::string last = "no address";
  for (addrinfo* a = ai.list; a; a = a->ai_next) {
    int fd = ::socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC, a->ai_protocol);
    if (fd < 0) {
      last = errno_text(errno);
      continue;
    }
    int one = 1;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    if (::bind(fd, a->ai_addr, a->ai_addrlen) == 0 && ::listen(fd, SOMAXCONN) == 0)
      return std::make_unique<TcpListener>(fd, sockaddr_is_loopback(a->ai_addr));
    last = errno_text(errno);
    ::close(fd);
  }
  throw TransportError("cannot listen on " + host + ":" + std::to_string(port) + ": " + last);
}

std::unique_ptr<Connection> tcp_adopt(int fd, const std::string& peer) {
  tune_socket(fd);
  return std::make_unique<TcpConnection>(fd, peer);
}

}  // namespace rgpu::transport
