#include "server/peer_ipc.h"

#include <poll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <stdexcept>

#include "common/cuda_errors.h"
#include "common/log.h"
#include "server/ipc_exports.h"

namespace rgpu::server {

using namespace rgpu::proto;
using backend::Status;

std::string peer_machine_id() {
  std::ifstream f("/proc/sys/kernel/random/boot_id");
  std::string id;
  std::getline(f, id);
  return id;
}

bool peer_ipc_enabled() {
  const char* v = getenv("RGPU_PEER_IPC");
  return !v || strcmp(v, "0") != 0;
}

bool peer_same_secret(const PeerSecret& a, const PeerSecret& b) {
  volatile uint8_t d = 0;  // constant time: every byte is compared
  for (size_t i = 0; i < a.size(); ++i) d = d | (a[i] ^ b[i]);
  return d == 0;
}

namespace {

constexpr size_t kMaxExports = 64;  // per link; the oldest goes first (unmapped by the importer)

// An abstract unix socket address for `name` (a leading NUL, no file).
socklen_t abstract_addr(const std::string& name, sockaddr_un& a) {
  memset(&a, 0, sizeof a);
  a.sun_family = AF_UNIX;
  size_t n = std::min(name.size(), sizeof a.sun_path - 1);
  memcpy(a.sun_path + 1, name.data(), n);
  return static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + 1 + n);
}

void set_timeouts(int fd, int seconds) {
  timeval tv{seconds, 0};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
}

bool read_exact(int fd, void* p, size_t n) {
  auto* c = static_cast<char*>(p);
  while (n) {
    ssize_t r = ::recv(fd, c, n, 0);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) return false;
    c += r;
    n -= static_cast<size_t>(r);
  }
  return true;
}

bool write_exact(int fd, const void* p, size_t n) {
  auto* c = static_cast<const char*>(p);
  while (n) {
    ssize_t r = ::send(fd, c, n, MSG_NOSIGNAL);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) return false;
    c += r;
    n -= static_cast<size_t>(r);
  }
  return true;
}

std::string sys_error(const char* what) { return std::string(what) + ": " + strerror(errno); }

}  // namespace

int peer_ipc_listen(std::string& name, std::string& why) {
  uint8_t r[16];
  random_bytes(r, sizeof r);
  name = "rgpu-peer-";
  static const char* hexd = "0123456789abcdef";
  for (uint8_t b : r) {
    name += hexd[b >> 4];
    name += hexd[b & 15];
  }
  int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) {
    why = sys_error("socket");
    return -1;
  }
  sockaddr_un a;
  socklen_t len = abstract_addr(name, a);
  if (::bind(fd, reinterpret_cast<sockaddr*>(&a), len) != 0 || ::listen(fd, 1) != 0) {
    why = sys_error("bind/listen");
    ::close(fd);
    return -1;
  }
  return fd;
}

int peer_ipc_accept(int listener, const PeerSecret& nonce, int timeout_s, std::string& why) {
  pollfd p{listener, POLLIN, 0};
  int n = ::poll(&p, 1, timeout_s * 1000);
  if (n <= 0) {
    why = n == 0 ? "the peer did not connect" : sys_error("poll");
    return -1;
  }
  int fd = ::accept4(listener, nullptr, nullptr, SOCK_CLOEXEC);
  if (fd < 0) {
    why = sys_error("accept");
    return -1;
  }
  set_timeouts(fd, timeout_s);
  PeerSecret shown{};
  const char ack = 1;
  if (!read_exact(fd, shown.data(), shown.size()) || !peer_same_secret(shown, nonce) ||
      !write_exact(fd, &ack, 1)) {
    why = "the connection did not show the link's nonce";
    ::close(fd);
    return -1;
  }
  return fd;
}

int peer_ipc_connect(const std::string& name, const PeerSecret& nonce, int timeout_s,
                     std::string& why) {
  int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) {
    why = sys_error("socket");
    return -1;
  }
  set_timeouts(fd, timeout_s);
  sockaddr_un a;
  socklen_t len = abstract_addr(name, a);
  char ack = 0;
  if (::connect(fd, reinterpret_cast<sockaddr*>(&a), len) != 0) {
    why = sys_error("connect");  // e.g. another network namespace
  } else if (!write_exact(fd, nonce.data(), nonce.size()) || !read_exact(fd, &ack, 1) || ack != 1) {
    why = "the peer did not acknowledge the socket";
  } else {
    return fd;
  }
  ::close(fd);
  return -1;
}

void peer_ipc_send_fd(int sock, int fd) {
  char byte = 0;
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
  ssize_t n;
  do {
    n = ::sendmsg(sock, &m, MSG_NOSIGNAL);
  } while (n < 0 && errno == EINTR);
  if (n != 1) throw std::runtime_error(sys_error("sending a memory descriptor to the peer"));
}

int peer_ipc_recv_fd(int sock) {
  char byte;
  iovec v{&byte, 1};
  char ctrl[CMSG_SPACE(sizeof(int))] = {};
  msghdr m{};
  m.msg_iov = &v;
  m.msg_iovlen = 1;
  m.msg_control = ctrl;
  m.msg_controllen = sizeof ctrl;
  ssize_t n;
  do {
    n = ::recvmsg(sock, &m, MSG_CMSG_CLOEXEC);
  } while (n < 0 && errno == EINTR);
  if (n != 1) throw std::runtime_error("the peer's memory descriptor did not come");
  cmsghdr* c = CMSG_FIRSTHDR(&m);
  if (!c || c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS ||
      c->cmsg_len != CMSG_LEN(sizeof(int)))
    throw std::runtime_error("the peer sent a byte without a memory descriptor");
  int fd;
  memcpy(&fd, CMSG_DATA(c), sizeof fd);
  return fd;
}

// ---- the passive end

void PeerExports::map(backend::Executor& exec, const PeerRows& rows, uint32_t importer,
                      const std::vector<uint64_t>& forget, int sock, PeerIpcMapRep& rep) {
  auto drop = [&](std::vector<Export>::iterator it, bool tell) {
    if (tell) {
      rep.drops.push_back(it->importer);
      rep.drops.push_back(static_cast<uint64_t>(it->dev));
      rep.drops.push_back(it->base);
    }
    return exports_.erase(it);
  };
  for (size_t i = 0; i + 2 < forget.size(); i += 3)
    for (auto it = exports_.begin(); it != exports_.end(); ++it)
      if (it->importer == forget[i] && static_cast<uint64_t>(it->dev) == forget[i + 1] &&
          it->base == forget[i + 2]) {
        drop(it, false);
        break;
      }
  // Exports whose allocation is gone: the memory may be another allocation's now, or freed.
  for (auto it = exports_.begin(); it != exports_.end();)
    it = stamp_at_(it->dev, it->probe) != it->stamp ? drop(it, true) : std::next(it);
  const uint64_t end = rows.base + (rows.height - 1) * rows.pitch + rows.width;
  for (const Export& e : exports_)
    if (e.importer == importer && e.dev == rows.dev && rows.base >= e.base &&
        end <= e.base + e.size) {
      rep.ipc = 1;
      rep.base = e.base;
      rep.size = e.size;
      rep.offset = rows.base - e.base;
      return;
    }
  int fd = -1;
  uint64_t base = 0, size = 0;
  uint32_t kind = 0;
  Status s = exec.ipc_mem_export(rows.dev, rows.base, fd, base, size, kind);
  if (!s.ok() || rows.base < base || end > base + size) {
    if (s.ok()) ::close(fd);
    if (!warned_)
      LOG_INFO("peer copies of memory at 0x%llx go through staging buffers: %s",
               static_cast<unsigned long long>(rows.base),
               s.ok() ? "the rows span more than one mapping" : s.message.c_str());
    warned_ = true;
    return;  // rep.ipc = 0: the pipeline
  }
  for (auto it = exports_.begin(); it != exports_.end(); ++it)
    if (it->importer == importer && it->dev == rows.dev && it->base == base) {
      drop(it, true);  // a smaller export of the same base (the mapping grew?): replaced
      break;
    }
  while (exports_.size() >= kMaxExports) drop(exports_.begin(), true);
  try {
    peer_ipc_send_fd(sock, fd);
  } catch (...) {
    ::close(fd);
    throw;
  }
  ::close(fd);
  exports_.push_back(
      Export{importer, rows.dev, base, size, rows.base, stamp_at_(rows.dev, rows.base)});
  rep.ipc = 1;
  rep.fd_follows = 1;
  rep.kind = kind;
  rep.base = base;
  rep.size = size;
  rep.offset = rows.base - base;
}

// ---- the active end

bool PeerImports::apply(int dev, uint32_t remote_dev, uint64_t near, const PeerIpcMapRep& rep,
                        int sock, uint64_t& addr, std::string& why) {
  std::lock_guard<std::mutex> lock(mu_);
  for (size_t i = 0; i + 2 < rep.drops.size(); i += 3) {
    auto it = imports_.find(Key{static_cast<uint32_t>(rep.drops[i]),
                                static_cast<uint32_t>(rep.drops[i + 1]), rep.drops[i + 2]});
    if (it != imports_.end()) {
      later_.push_back({it->first, it->second});
      imports_.erase(it);
    }
  }
  if (!rep.ipc) {
    why = "the peer cannot share that memory";
    return false;
  }
  const uint32_t local = static_cast<uint32_t>(dev), remote = remote_dev;
  const Key key{local, remote, rep.base};
  auto it = imports_.find(key);
  if (rep.fd_follows) {
    int fd = peer_ipc_recv_fd(sock);
    if (it != imports_.end()) {
      later_.push_back({it->first, it->second});
      imports_.erase(it);
    }
    uint64_t a = 0;
    Status s = hooks_.reserve(static_cast<int>(local), near, rep.size, a);
    if (s.ok()) {
      s = exec_.ipc_mem_import(static_cast<int>(local), fd, rep.kind, a, rep.size);
      if (!s.ok()) hooks_.unreserve(static_cast<int>(local), a, rep.size);
    }
    ::close(fd);
    if (!s.ok()) {
      // The exporter counts it as held: tell it otherwise at the next map.
      forgotten_.insert(forgotten_.end(), {local, remote, rep.base});
      why = "cannot map the peer's memory: " + s.message;
      return false;
    }
    it = imports_.emplace(key, Import{a, rep.size}).first;
  } else if (it == imports_.end()) {
    forgotten_.insert(forgotten_.end(), {local, remote, rep.base});
    why = "the peer's memory is not mapped here (any more)";
    return false;
  }
  if (rep.offset >= it->second.size) {
    why = "the peer named rows outside its export";
    return false;
  }
  addr = it->second.addr + rep.offset;
  return true;
}

std::vector<uint64_t> PeerImports::take_forgotten() {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<uint64_t> out;
  out.swap(forgotten_);
  return out;
}

void PeerImports::forget_device(int dev) {
  std::lock_guard<std::mutex> lock(mu_);
  for (auto it = later_.begin(); it != later_.end();)
    if (std::get<0>(it->first) == static_cast<uint32_t>(dev)) {
      unmap(it->first, it->second);
      it = later_.erase(it);
    } else {
      ++it;
    }
  for (auto it = imports_.begin(); it != imports_.end();) {
    if (std::get<0>(it->first) != static_cast<uint32_t>(dev)) {
      ++it;
      continue;
    }
    unmap(it->first, it->second);
    forgotten_.insert(forgotten_.end(),
                      {std::get<0>(it->first), std::get<1>(it->first), std::get<2>(it->first)});
    it = imports_.erase(it);
  }
}

void PeerImports::flush() {
  std::lock_guard<std::mutex> lock(mu_);
  for (auto& [k, im] : later_) unmap(k, im);
  later_.clear();
}

void PeerImports::clear() {
  std::lock_guard<std::mutex> lock(mu_);
  for (auto& [k, im] : later_) unmap(k, im);
  later_.clear();
  for (auto& [k, im] : imports_) unmap(k, im);
  imports_.clear();
  forgotten_.clear();
}

void PeerImports::unmap(const Key& k, const Import& im) {
  const int dev = static_cast<int>(std::get<0>(k));
  if (Status s = exec_.ipc_mem_close(dev, im.addr, im.size); !s.ok())
    LOG_WARN("unmapping a peer's memory at 0x%llx: %s", static_cast<unsigned long long>(im.addr),
             s.message.c_str());
  hooks_.unreserve(dev, im.addr, im.size);
}

}  // namespace rgpu::server
