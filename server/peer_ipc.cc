#include "server/peer_ipc.h"

#include <poll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
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
  // The boot id names the kernel; the network namespace, whether an abstract unix socket of one
  // rgpud reaches the other (containers share the first, not the second).
  std::ifstream f("/proc/sys/kernel/random/boot_id");
  std::string id;
  std::getline(f, id);
  char ns[128] = {};
  ssize_t n = ::readlink("/proc/self/ns/net", ns, sizeof ns - 1);
  if (id.empty() || n <= 0) return "";
  return id + " " + std::string(ns, static_cast<size_t>(n));
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
  // One deadline for the whole exchange; connections of other users, or that do not show the
  // nonce at once, are dropped and the wait goes on (the socket's name is public).
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(timeout_s);
  why = "the peer did not connect";
  for (;;) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
                          deadline - std::chrono::steady_clock::now())
                          .count();
    if (left <= 0) return -1;
    pollfd p{listener, POLLIN, 0};
    int n = ::poll(&p, 1, static_cast<int>(left));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return -1;
    int fd = ::accept4(listener, nullptr, nullptr, SOCK_CLOEXEC);
    if (fd < 0) continue;
    ucred cred{};
    socklen_t clen = sizeof cred;
    const bool same_user =
        ::getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &clen) == 0 && cred.uid == ::geteuid();
    // The nonce is sent at once by the peer: a short limit per connection.
    set_timeouts(fd, 1);
    PeerSecret shown{};
    const char ack = 1;
    if (same_user && read_exact(fd, shown.data(), shown.size()) && peer_same_secret(shown, nonce) &&
        write_exact(fd, &ack, 1)) {
      set_timeouts(fd, timeout_s);
      return fd;
    }
    why = "a connection that did not show the link's nonce";
    ::close(fd);
  }
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
  const char byte = 0;
  ssize_t n;
  do {
    n = send_control(sock, &byte, 1, fd);
  } while (n < 0 && errno == EINTR);
  if (n != 1) throw std::runtime_error(sys_error("sending a memory descriptor to the peer"));
}

int peer_ipc_recv_fd(int sock) {
  char byte;
  int fd = -1;
  ssize_t n;
  do {
    n = recv_control(sock, &byte, 1, fd, 0);
  } while (n < 0 && errno == EINTR);
  if (n != 1) {
    if (fd >= 0) ::close(fd);
    throw std::runtime_error("the peer's memory descriptor did not come");
  }
  if (fd < 0) throw std::runtime_error("the peer sent a byte without a memory descriptor");
  return fd;
}

// ---- the passive end

void PeerExports::forget(const std::vector<uint64_t>& triples) {
  for (size_t i = 0; i + 2 < triples.size(); i += 3)
    for (auto it = exports_.begin(); it != exports_.end(); ++it)
      if (it->importer == triples[i] && static_cast<uint64_t>(it->dev) == triples[i + 1] &&
          it->base == triples[i + 2]) {
        exports_.erase(it);
        break;
      }
}

void PeerExports::map(backend::Executor& exec, const PeerRows& rows, uint64_t stamp,
                      uint32_t importer, int sock, PeerIpcMapRep& rep) {
  auto drop = [&](std::vector<Export>::iterator it) {
    rep.drops.push_back(it->importer);
    rep.drops.push_back(static_cast<uint64_t>(it->dev));
    rep.drops.push_back(it->base);
    return exports_.erase(it);
  };
  // Exports whose allocation is gone: the memory may be another allocation's now, or freed.
  for (auto it = exports_.begin(); it != exports_.end();)
    it = stamp_at_(it->dev, it->probe) != it->stamp ? drop(it) : std::next(it);
  if (stamp == 0) return;  // the rows' allocation is being freed: the pipeline (rep.ipc = 0)
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
      drop(it);  // a smaller export of the same base (the mapping grew?): replaced
      break;
    }
  while (exports_.size() >= kMaxExports) drop(exports_.begin());
  try {
    peer_ipc_send_fd(sock, fd);
  } catch (...) {
    ::close(fd);
    throw;
  }
  ::close(fd);
  // `stamp` is the allocation's as PeerBegin checked the rows: while it lives, the mapping
  // that holds it (and so the export's memory) is the same.
  exports_.push_back(Export{importer, rows.dev, base, size, rows.base, stamp});
  rep.ipc = 1;
  rep.fd_follows = 1;
  rep.kind = kind;
  rep.base = base;
  rep.size = size;
  rep.offset = rows.base - base;
}

// ---- the active end

bool PeerImports::apply(int dev, uint32_t remote_dev, uint64_t near, uint64_t extent,
                        const PeerIpcMapRep& rep, int sock, uint64_t& addr, std::string& why) {
  if (!rep.ipc && rep.fd_follows) throw std::runtime_error("the peer sent a descriptor unasked");
  const uint32_t local = static_cast<uint32_t>(dev), remote = remote_dev;
  const Key key{local, remote, rep.base};
  Import held;
  {
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
    auto it = imports_.find(key);
    if (it != imports_.end()) {
      if (rep.fd_follows) {  // replaced
        later_.push_back({it->first, it->second});
        imports_.erase(it);
      } else {
        held = it->second;
      }
    }
  }
  if (rep.fd_follows) {
    // Mapped without the lock (the dispatcher's flush() must not wait behind it).
    int fd = peer_ipc_recv_fd(sock);
    uint64_t a = 0;
    Status s = hooks_.reserve(static_cast<int>(local), near, rep.size, a);
    if (s.ok()) {
      s = exec_.ipc_mem_import(static_cast<int>(local), fd, rep.kind, a, rep.size, 0, rep.size);
      if (!s.ok()) hooks_.unreserve(static_cast<int>(local), a, rep.size);
    }
    ::close(fd);
    std::lock_guard<std::mutex> lock(mu_);
    if (!s.ok()) {
      // The exporter counts it as held: tell it otherwise at the next map.
      forgotten_.insert(forgotten_.end(), {local, remote, rep.base});
      why = "cannot map the peer's memory: " + s.message;
      return false;
    }
    held = Import{a, rep.size, {}};
    imports_[key] = held;
  } else if (held.size == 0) {
    std::lock_guard<std::mutex> lock(mu_);
    forgotten_.insert(forgotten_.end(), {local, remote, rep.base});
    why = "the peer's memory is not mapped here (any more)";
    return false;
  }
  if (rep.offset > held.size || extent > held.size - rep.offset)
    throw std::runtime_error("the peer named rows outside its export");
  addr = held.addr + rep.offset;
  return true;
}

std::vector<uint64_t> PeerImports::take_forgotten() {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<uint64_t> out;
  out.swap(forgotten_);
  return out;
}

bool PeerImports::find(int dev, uint32_t remote_dev, uint64_t remote, uint64_t extent, Found& out) {
  const auto d = static_cast<uint32_t>(dev);
  std::lock_guard<std::mutex> lock(mu_);
  auto it = imports_.upper_bound(Key{d, remote_dev, remote});
  if (it == imports_.begin()) return false;
  --it;
  const auto& [kd, kr, base] = it->first;
  const Import& im = it->second;
  if (kd != d || kr != remote_dev || remote < base || remote - base >= im.size ||
      extent > im.size - (remote - base))
    return false;
  out.addr = im.addr + (remote - base);
  out.key = it->first;
  out.mapped = im.addr;
  return true;
}

PeerImports::Import* PeerImports::lookup(const Key& k, uint64_t mapped) {
  if (auto it = imports_.find(k); it != imports_.end() && it->second.addr == mapped)
    return &it->second;
  for (auto& [key, im] : later_)
    if (key == k && im.addr == mapped) return &im;
  return nullptr;
}

void PeerImports::note_use(const Found& f, uint64_t stream) {
  constexpr unsigned kEventDisableTiming = 2;
  const int dev = static_cast<int>(std::get<0>(f.key));
  {
    std::lock_guard<std::mutex> lock(mu_);
    Import* im = lookup(f.key, f.mapped);
    if (!im) return;  // cannot be: only this thread (the dispatcher's flush) unmaps
    for (Use& u : im->uses)
      if (u.stream == stream) {
        u.dirty = u.event != 0;
        return;
      }
  }
  uint64_t event = 0;
  if (!exec_.event_create(dev, kEventDisableTiming, event).ok()) event = 0;
  std::lock_guard<std::mutex> lock(mu_);
  if (Import* im = lookup(f.key, f.mapped)) im->uses.push_back(Use{stream, event, event != 0});
}

void PeerImports::record(int dev, Use& u) {
  if (!u.dirty) return;
  u.dirty = false;
  // Unrecorded, the event would say the stream is past copies it may not be: the import is never
  // unmapped (event 0), and the event goes.
  if (!exec_.event_record(dev, u.event, u.stream).ok()) {
    exec_.event_destroy(dev, u.event);
    u.event = 0;
  }
}

void PeerImports::stream_ending(int dev, uint64_t stream) {
  // Under mu_: the link's thread may move imports meanwhile (cuEventRecord only, no wait).
  std::lock_guard<std::mutex> lock(mu_);
  auto visit = [&](const Key& k, Import& im) {
    if (std::get<0>(k) != static_cast<uint32_t>(dev)) return;
    for (Use& u : im.uses)
      if (u.stream == stream) {
        record(dev, u);
        u.stream = kGone;
      }
  };
  for (auto& [k, im] : imports_) visit(k, im);
  for (auto& [k, im] : later_) visit(k, im);
  // Uses of streams destroyed earlier whose copies are over: a program that makes a stream per
  // copy would otherwise pile them up (and their events) on an import that stays mapped.
  auto prune = [&](const Key& k, Import& im) {
    const int d = static_cast<int>(std::get<0>(k));
    std::erase_if(im.uses, [&](const Use& u) {
      if (u.stream != kGone || u.event == 0 || u.dirty ||
          exec_.event_query(d, u.event).code == err::NotReady)
        return false;
      exec_.event_destroy(d, u.event);
      return true;
    });
  };
  for (auto& [k, im] : imports_) prune(k, im);
  for (auto& [k, im] : later_) prune(k, im);
}

bool PeerImports::unused(const Key& k, const Import& im) {
  const int dev = static_cast<int>(std::get<0>(k));
  for (const Use& u : im.uses)
    if (u.event == 0 || u.dirty || exec_.event_query(dev, u.event).code == err::NotReady)
      return false;
  return true;
}

bool PeerImports::empty() {
  std::lock_guard<std::mutex> lock(mu_);
  return imports_.empty() && later_.empty();
}

void PeerImports::retire() {
  std::lock_guard<std::mutex> lock(mu_);
  for (auto& kv : imports_) later_.push_back(kv);
  imports_.clear();
  forgotten_.clear();
}

// Unmapping may wait for the GPU's streams: never under mu_ (a copy takes it).
void PeerImports::flush() {
  std::vector<std::pair<Key, Import>> gone, busy;
  {
    std::lock_guard<std::mutex> lock(mu_);
    gone.swap(later_);
  }
  for (auto& [k, im] : gone) {
    for (Use& u : im.uses) record(static_cast<int>(std::get<0>(k)), u);
    if (unused(k, im))
      unmap(k, im);
    else
      busy.push_back({k, im});
  }
  if (busy.empty()) return;
  std::lock_guard<std::mutex> lock(mu_);
  later_.insert(later_.end(), busy.begin(), busy.end());
}

void PeerImports::forget_device(int dev) {
  std::vector<std::pair<Key, Import>> gone;
  {
    std::lock_guard<std::mutex> lock(mu_);
    const auto d = static_cast<uint32_t>(dev);
    for (auto it = later_.begin(); it != later_.end();)
      if (std::get<0>(it->first) == d) {
        gone.push_back(*it);
        it = later_.erase(it);
      } else {
        ++it;
      }
    for (auto it = imports_.begin(); it != imports_.end();) {
      if (std::get<0>(it->first) != d) {
        ++it;
        continue;
      }
      gone.push_back(*it);
      forgotten_.insert(forgotten_.end(),
                        {std::get<0>(it->first), std::get<1>(it->first), std::get<2>(it->first)});
      it = imports_.erase(it);
    }
  }
  for (auto& [k, im] : gone) unmap(k, im);
}

void PeerImports::clear() {
  std::vector<std::pair<Key, Import>> gone;
  {
    std::lock_guard<std::mutex> lock(mu_);
    gone.swap(later_);
    for (auto& kv : imports_) gone.push_back(kv);
    imports_.clear();
    forgotten_.clear();
  }
  for (auto& [k, im] : gone) {
    if (unused(k, im)) {
      unmap(k, im);
    } else {
      // A stream may still copy through it: unmapping now could fault the GPU's context.  The
      // mapping goes with the session's.
      LOG_DEBUG("a peer's memory at 0x%llx stays mapped: a stream may still use it",
                static_cast<unsigned long long>(im.addr));
    }
  }
}

void PeerImports::unmap(const Key& k, const Import& im) {
  const int dev = static_cast<int>(std::get<0>(k));
  for (const Use& u : im.uses)
    if (u.event) exec_.event_destroy(dev, u.event);
  if (Status s = exec_.ipc_mem_close(dev, im.addr, im.size); !s.ok()) {
    // Still mapped: its address space stays reserved (never handed out over live memory).
    LOG_WARN("unmapping a peer's memory at 0x%llx: %s", static_cast<unsigned long long>(im.addr),
             s.message.c_str());
    return;
  }
  hooks_.unreserve(dev, im.addr, im.size);
}

}  // namespace rgpu::server
