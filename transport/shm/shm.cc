#include "transport/shm/shm.h"

#include <fcntl.h>
#include <linux/futex.h>
#include <poll.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstring>

#include "common/log.h"
#include "common/spin.h"
#include "transport/memory.h"
#include "transport/shm/segment.h"

namespace rgpu::transport {
namespace {

constexpr size_t kRingBytes = 16u << 20;  // per direction

using Ring = ShmRing;
using Segment = ShmSegment;
size_t segment_size(size_t ring) { return shm_segment_size(ring); }

int recv_fd(int sock);

void futex_wait(std::atomic<uint32_t>* word, uint32_t expect) {
  timespec ts{0, 50 * 1000 * 1000};  // wake up now and then to see whether the peer is alive
  syscall(SYS_futex, reinterpret_cast<uint32_t*>(word), FUTEX_WAIT, expect, &ts, nullptr, 0);
}
void futex_wake(std::atomic<uint32_t>* word) {
  syscall(SYS_futex, reinterpret_cast<uint32_t*>(word), FUTEX_WAKE, 1, nullptr, nullptr, 0);
}

class ShmConnection final : public Connection {
 public:
  ShmConnection(int sock, void* base, size_t ring, bool server, std::string peer, long uid = -1)
      : sock_(sock), base_(base), ring_(ring), peer_(std::move(peer)), uid_(uid) {
    auto* seg = static_cast<Segment*>(base);
    char* data = static_cast<char*>(base) + sizeof(Segment);
    tx_ = &seg->rings[server ? 1 : 0];
    rx_ = &seg->rings[server ? 0 : 1];
    tx_data_ = data + (server ? ring : 0);
    rx_data_ = data + (server ? 0 : ring);
  }
  ~ShmConnection() override {
    shutdown();
    munmap(base_, segment_size(ring_));
    ::close(sock_);
  }

  void send_all(const iovec* iov, int count) override {
    for (int i = 0; i < count; ++i) {
      const char* p = static_cast<const char*>(iov[i].iov_base);
      size_t left = iov[i].iov_len;
      while (left) {
        if (broken_) throw TransportError(broken_why_);
        // The peer's tail, read once: it must lie within one ring behind our head.
        const uint64_t tail = tx_->tail.load(std::memory_order_acquire);
        // Indices only grow (64 bits never wrap): the peer cannot have read more than we wrote.
        const uint64_t used = tx_head_ - tail;
        if (tail > tx_head_ || used > ring_)
          corrupt("its read index is " + std::to_string(tail) + ", our write index " +
                  std::to_string(tx_head_));
        const uint64_t space = ring_ - used;
        if (space == 0) {
          wait_for(
              tx_->space_seq, tx_->producer_waiting,
              [&] { return tx_->tail.load(std::memory_order_acquire) != tail; }, send_timeout_s_,
              true);
          continue;
        }
        size_t n = std::min<uint64_t>(left, space);
        size_t at = tx_head_ % ring_;
        size_t first = std::min(n, ring_ - at);
        memcpy(tx_data_ + at, p, first);
        memcpy(tx_data_, p + first, n - first);
        tx_head_ += n;
        tx_->head.store(tx_head_, std::memory_order_release);
        tx_->data_seq.fetch_add(1, std::memory_order_release);
        if (tx_->consumer_waiting.load(std::memory_order_acquire)) futex_wake(&tx_->data_seq);
        p += n;
        left -= n;
      }
    }
  }

  void recv_all(const iovec* iov, int count) override {
    for (int i = 0; i < count; ++i) {
      char* p = static_cast<char*>(iov[i].iov_base);
      size_t left = iov[i].iov_len;
      while (left) {
        size_t n = take(p, left, true, recv_timeout_s_);
        p += n;
        left -= n;
      }
    }
  }

  bool recv_or_eof(void* buf, size_t len) override { return recv_first(buf, len, false); }
  bool recv_idle_or_eof(void* buf, size_t len) override { return recv_first(buf, len, true); }

  std::string peer() const override { return peer_; }
  void shutdown() override {
    tx_->closed.store(1);
    rx_->closed.store(1);
    futex_wake(&tx_->data_seq);
    futex_wake(&rx_->space_seq);
    futex_wake(&tx_->space_seq);
    futex_wake(&rx_->data_seq);
    ::shutdown(sock_, SHUT_RDWR);
  }
  int fd() const override { return sock_; }
  void set_recv_timeout(int seconds) override { recv_timeout_s_ = seconds; }
  void set_send_timeout(int seconds) override { send_timeout_s_ = seconds; }
  const char* kind() const override { return "shm"; }
  bool can_pass_fds() const override { return true; }
  long peer_uid() const override { return uid_; }
  void send_fd(int fd) override { shm_send_fd(sock_, fd); }
  Capabilities capabilities() const override {
    Capabilities c;
    c.passes_descriptors = c.registers_memory = c.co_located_only = true;
    return c;
  }
  uint64_t register_memory(const MemoryRegion& r) override {
    if (r.fd < 0)
      throw TransportError(
          "shared memory registers descriptor-backed segments only (transport/memory.h "
          "allocate_region), not an address");
    shm_send_fd(sock_, r.fd);
    return next_key_.fetch_add(1, std::memory_order_relaxed);
  }
  RemoteMapping map_remote(uint64_t key, uint64_t size) override {
    int fd = transport::recv_fd(sock_);
    if (fd < 0) throw TransportError("the client sent no descriptor");
    return map_peer_segment(fd, key, size);
  }
  void unmap_remote(const RemoteMapping& m) override {
    if (m.base) munmap(m.base, m.size);
  }
  int recv_fd() override {
    int fd = transport::recv_fd(sock_);
    if (fd < 0) throw TransportError("the client sent no descriptor");
    return fd;
  }

 private:
  // recv_or_eof; `idle`: the wait for the first byte has no deadline.
  bool recv_first(void* buf, size_t len, bool idle) {
    if (!len) return true;
    size_t n = take(static_cast<char*>(buf), len, false, idle ? 0 : recv_timeout_s_);
    if (n == 0) return false;
    iovec rest{static_cast<char*>(buf) + n, len - n};
    try {
      recv_all(&rest, 1);
    } catch (const TransportError& e) {
      if (e.timed_out) throw;
      throw TransportError("connection to " + peer_ + " closed in the middle of a message", true);
    }
    return true;
  }

  // Copies up to `len` available bytes; waits for at least one, at most `timeout_s` (0: no
  // limit).  Returns 0 only when the peer went away before any byte and `must` is false.
  size_t take(char* p, size_t len, bool must, int timeout_s) {
    for (;;) {
      if (broken_) throw TransportError(broken_why_);
      // The peer's head, read once: it must lie within one ring ahead of our tail.
      const uint64_t head = rx_->head.load(std::memory_order_acquire);
      const uint64_t avail = head - rx_tail_;
      if (head < rx_tail_ || avail > ring_)
        corrupt("its write index is " + std::to_string(head) + ", our read index " +
                std::to_string(rx_tail_));
      if (avail) {
        size_t n = std::min<uint64_t>(len, avail);
        size_t at = rx_tail_ % ring_;
        size_t first = std::min(n, ring_ - at);
        memcpy(p, rx_data_ + at, first);
        memcpy(p + first, rx_data_, n - first);
        rx_tail_ += n;
        rx_->tail.store(rx_tail_, std::memory_order_release);
        rx_->space_seq.fetch_add(1, std::memory_order_release);
        if (rx_->producer_waiting.load(std::memory_order_acquire)) futex_wake(&rx_->space_seq);
        return n;
      }
      try {
        wait_for(
            rx_->data_seq, rx_->consumer_waiting,
            [&] { return rx_->head.load(std::memory_order_acquire) != head; }, timeout_s, false);
      } catch (const TransportError& e) {
        if (!must && !e.timed_out) return 0;
        throw;
      }
    }
  }

  // The other process broke the ring's invariants: stop using the segment for good.
  [[noreturn]] void corrupt(const std::string& what) {
    broken_ = true;
    broken_why_ = "shared-memory ring from " + peer_ + " is corrupt (" + what + ", ring of " +
                  std::to_string(ring_) + " bytes); closing the connection";
    LOG_WARN("%s", broken_why_.c_str());
    tx_->closed.store(1);
    ::shutdown(sock_, SHUT_RDWR);
    throw TransportError(broken_why_);
  }

  // Spins, then sleeps on the futex word `seq` until `ready()`; throws when the peer is gone or,
  // with `timeout_s` > 0, when that long passed (waiting for space to send, or for data).
  template <class F>
  void wait_for(std::atomic<uint32_t>& seq, std::atomic<uint32_t>& waiting, F ready, int timeout_s,
                bool sending) {
    if (spin_until(ready)) return;
    auto started = std::chrono::steady_clock::now();
    for (;;) {
      uint32_t s = seq.load(std::memory_order_acquire);
      waiting.store(1, std::memory_order_seq_cst);
      if (ready()) break;
      if (tx_->closed.load() || rx_->closed.load() || !peer_alive()) {
        waiting.store(0);
        throw TransportError("connection to " + peer_ + " closed by peer", true);
      }
      if (timeout_s > 0 &&
          std::chrono::steady_clock::now() - started > std::chrono::seconds(timeout_s)) {
        waiting.store(0);
        std::string secs = std::to_string(timeout_s);
        throw TransportError(sending ? "send to " + peer_ + " made no progress for " + secs +
                                           " s (the peer is not reading)"
                                     : "no data from " + peer_ + " for " + secs + " s",
                             false, true);
      }
      futex_wait(&seq, s);
    }
    waiting.store(0);
  }

  bool peer_alive() const {
    pollfd p{sock_, POLLIN, 0};
    if (poll(&p, 1, 0) <= 0) return true;
    if (p.revents & (POLLHUP | POLLERR)) return false;
    char c;
    return ::recv(sock_, &c, 1, MSG_PEEK | MSG_DONTWAIT) != 0;
  }

  int sock_;
  std::atomic<uint64_t> next_key_{1};
  void* base_;
  size_t ring_;
  std::string peer_;
  Ring* tx_;
  Ring* rx_;
  char* tx_data_;
  char* rx_data_;
  int recv_timeout_s_ = 0, send_timeout_s_ = 0;
  long uid_;
  uint64_t tx_head_ = 0;  // our write index of tx (only ever written to the segment)
  uint64_t rx_tail_ = 0;  // our read index of rx (idem)
  bool broken_ = false;
  std::string broken_why_;
};

sockaddr_un abstract_address(const std::string& name, socklen_t& len) {
  sockaddr_un a{};
  a.sun_family = AF_UNIX;
  a.sun_path[0] = '\0';
  size_t n = std::min(name.size(), sizeof a.sun_path - 2);
  memcpy(a.sun_path + 1, name.data(), n);
  len = static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + 1 + n);
  return a;
}

void* create_segment(size_t ring, int& fd) {
  size_t size = segment_size(ring);
  std::string why;
  fd = shm_create_sealed("rgpu-shm", size, why);
  if (fd < 0) throw TransportError("cannot create the shared-memory segment: " + why);
  void* base = mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (base == MAP_FAILED) {
    close(fd);
    fd = -1;
    throw TransportError(std::string("mmap: ") + strerror(errno));
  }
  auto* seg = static_cast<Segment*>(base);
  seg->magic = kShmMagic;
  seg->ring_bytes = static_cast<uint32_t>(ring);
  return base;
}

}  // namespace

void shm_send_fd(int sock, int fd) {
  char byte = 'R';
  iovec v{&byte, 1};
  char ctrl[CMSG_SPACE(sizeof(int))] = {};
  msghdr m{};
  m.msg_iov = &v;
  m.msg_iovlen = 1;
  m.msg_control = ctrl;
  m.msg_controllen = sizeof ctrl;
  cmsghdr* c = CMSG_FIRSTHDR(&m);
  c->cmsg_level = SOL_SOCKET;
  c->cmsg_type = SCM_RIGHTS;
  c->cmsg_len = CMSG_LEN(sizeof(int));
  memcpy(CMSG_DATA(c), &fd, sizeof fd);
  if (sendmsg(sock, &m, MSG_NOSIGNAL) != 1)
    throw TransportError(std::string("cannot hand the segment to rgpud: ") + strerror(errno));
}

namespace {

int recv_fd(int sock) {
  char byte;
  iovec v{&byte, 1};
  char ctrl[CMSG_SPACE(sizeof(int))] = {};
  msghdr m{};
  m.msg_iov = &v;
  m.msg_iovlen = 1;
  m.msg_control = ctrl;
  m.msg_controllen = sizeof ctrl;
  if (recvmsg(sock, &m, MSG_CMSG_CLOEXEC) != 1) return -1;
  cmsghdr* c = CMSG_FIRSTHDR(&m);
  if (!c || c->cmsg_type != SCM_RIGHTS || c->cmsg_len != CMSG_LEN(sizeof(int))) return -1;
  int fd;
  memcpy(&fd, CMSG_DATA(c), sizeof fd);
  return fd;
}

// Server side of the setup: receive and check the client's segment, map it, acknowledge.
std::unique_ptr<Connection> adopt_client(int sock, int timeout_s) {
  ucred cred{};
  socklen_t clen = sizeof cred;
  getsockopt(sock, SOL_SOCKET, SO_PEERCRED, &cred, &clen);
  std::string peer = "local pid " + std::to_string(cred.pid) + " uid " + std::to_string(cred.uid);
  timeval tv{timeout_s > 0 ? timeout_s : 10, 0};
  setsockopt(sock, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  setsockopt(sock, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
  int fd = recv_fd(sock);
  if (fd < 0) {
    close(sock);
    throw TransportError("shared-memory client " + peer + " sent no segment");
  }
  // The header is read once (pread, into a local); the size comes from fstat, and the seal keeps
  // the client from shrinking the segment under the mapping later (which would be SIGBUS here).
  Segment head{};
  std::string why;
  if (pread(fd, &head, sizeof head, 0) != sizeof head)
    why = "the segment is smaller than its header";
  else if (head.magic != kShmMagic)
    why = "the segment has no rgpu header";
  else if (head.ring_bytes < kShmMinRing || head.ring_bytes > kShmMaxRing)
    why = "the segment announces rings of " + std::to_string(head.ring_bytes) + " bytes";
  else
    shm_check_sealed(fd, segment_size(head.ring_bytes), why);
  void* base = why.empty() ? mmap(nullptr, segment_size(head.ring_bytes), PROT_READ | PROT_WRITE,
                                  MAP_SHARED, fd, 0)
                           : MAP_FAILED;
  if (why.empty() && base == MAP_FAILED) why = std::string("mmap: ") + strerror(errno);
  close(fd);
  if (base == MAP_FAILED) {
    close(sock);
    throw TransportError("shared-memory client " + peer + " sent a bad segment: " + why);
  }
  char ack = 'K';
  if (send(sock, &ack, 1, MSG_NOSIGNAL) != 1) {
    munmap(base, segment_size(head.ring_bytes));
    close(sock);
    throw TransportError("shared-memory client " + peer + " went away");
  }
  tv = timeval{0, 0};
  setsockopt(sock, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  setsockopt(sock, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
  return std::make_unique<ShmConnection>(sock, base, head.ring_bytes, true, peer,
                                         static_cast<long>(cred.uid));
}

class ShmListener final : public Listener {
 public:
  ShmListener(int fd, std::string name) : fd_(fd), name_(std::move(name)) {}
  ~ShmListener() override { ::close(fd_); }
  std::unique_ptr<Connection> accept() override {
    int s = ::accept4(fd_, nullptr, nullptr, SOCK_CLOEXEC);
    if (s < 0) {
      if (errno == EINTR || errno == ECONNABORTED) return nullptr;
      throw TransportError(std::string("accept failed: ") + strerror(errno));
    }
    return adopt_client(s, 10);
  }
  int fd() const override { return fd_; }
  uint16_t port() const override { return 0; }
  bool is_loopback() const override { return true; }
  std::string address() const override { return "shm:@" + name_; }

 private:
  int fd_;
  std::string name_;
};

}  // namespace

int shm_accept(const Listener& listener) {
  int s = ::accept4(listener.fd(), nullptr, nullptr, SOCK_CLOEXEC);
  if (s < 0 && errno != EINTR && errno != ECONNABORTED)
    throw TransportError(std::string("accept failed: ") + strerror(errno));
  return s;
}

std::unique_ptr<Connection> shm_adopt(int sock, int timeout_s) {
  return adopt_client(sock, timeout_s);
}

std::string shm_socket_name(uint16_t port) { return "rgpud-" + std::to_string(port); }

std::unique_ptr<Connection> shm_connect(const std::string& name, int timeout_s) {
  int s = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (s < 0) throw TransportError(std::string("socket: ") + strerror(errno));
  socklen_t len;
  sockaddr_un a = abstract_address(name, len);
  // A unix connect waits (up to the send timeout) while the listener's backlog is full.
  timeval tv{timeout_s > 0 ? timeout_s : 10, 0};
  setsockopt(s, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
  if (connect(s, reinterpret_cast<sockaddr*>(&a), len) != 0) {
    int e = errno;
    close(s);
    throw TransportError("cannot reach rgpud's shared-memory socket @" + name + ": " +
                         (e == EAGAIN ? "no answer within " + std::to_string(tv.tv_sec) + " s"
                                      : std::string(strerror(e))));
  }
  int fd = -1;
  void* base = nullptr;
  try {
    base = create_segment(kRingBytes, fd);
    shm_send_fd(s, fd);
    close(fd);
    fd = -1;
    char ack = 0;
    setsockopt(s, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    ssize_t got = recv(s, &ack, 1, 0);
    if (got < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
      throw TransportError("rgpud did not take the shared-memory segment within " +
                           std::to_string(tv.tv_sec) + " s");
    if (got != 1 || ack != 'K')
      throw TransportError("rgpud did not accept the shared-memory segment");
    tv = timeval{0, 0};
    setsockopt(s, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    setsockopt(s, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
  } catch (...) {
    if (fd >= 0) close(fd);
    if (base) munmap(base, segment_size(kRingBytes));
    close(s);
    throw;
  }
  return std::make_unique<ShmConnection>(s, base, kRingBytes, false, "rgpud (shm @" + name + ")");
}

std::unique_ptr<Listener> shm_listen(const std::string& name) {
  int s = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (s < 0) throw TransportError(std::string("socket: ") + strerror(errno));
  socklen_t len;
  sockaddr_un a = abstract_address(name, len);
  if (bind(s, reinterpret_cast<sockaddr*>(&a), len) != 0 || listen(s, SOMAXCONN) != 0) {
    int e = errno;
    close(s);
    throw TransportError("cannot listen on @" + name + ": " + strerror(e));
  }
  return std::make_unique<ShmListener>(s, name);
}

void shm_pair(std::unique_ptr<Connection>& a, std::unique_ptr<Connection>& b, size_t ring) {
  int sv[2];
  if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0)
    throw TransportError("socketpair failed");
  int fd = -1;
  void* base = create_segment(ring, fd);
  void* base2 = mmap(nullptr, segment_size(ring), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  close(fd);
  a = std::make_unique<ShmConnection>(sv[0], base, ring, false, "test client");
  b = std::make_unique<ShmConnection>(sv[1], base2, ring, true, "test server");
}

}  // namespace rgpu::transport
