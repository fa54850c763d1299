#include "server/ipc_exports.h"

#include <poll.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <iterator>

#include "common/log.h"

namespace rgpu::server {
namespace {

using Id = std::array<uint8_t, 16>;

std::string hex(const uint8_t* p, size_t n) {
  static const char* digits = "0123456789abcdef";
  std::string s;
  for (size_t i = 0; i < n; ++i) {
    s += digits[p[i] >> 4];
    s += digits[p[i] & 15];
  }
  return s;
}

}  // namespace

void random_bytes(uint8_t* p, size_t n) {
  while (n > 0) {
    ssize_t got = getrandom(p, n, 0);
    if (got < 0) {
      if (errno == EINTR) continue;
      // Without randomness ids would be guessable; refuse to run rather than weaken them.
      LOG_ERROR("getrandom: %s", strerror(errno));
      abort();
    }
    p += got;
    n -= static_cast<size_t>(got);
  }
}

std::string await_reply(int control, char* buf, size_t cap, ssize_t& n, int& fd, int timeout_ms) {
  fd = -1;
  pollfd p{control, POLLIN, 0};
  int r;
  do {
    r = poll(&p, 1, timeout_ms);
  } while (r < 0 && errno == EINTR);
  if (r == 0)
    return "rgpud did not answer an IPC request within " + std::to_string(timeout_ms) + " ms";
  if (r < 0) return std::string("cannot wait for rgpud: ") + strerror(errno);
  n = recv_control(control, buf, cap, fd, 0);
  if (n <= 0) return "rgpud closed the control socket (it is shutting down)";
  if (buf[0] == kIpcFail)
    return n > 1 ? std::string(buf + 1, static_cast<size_t>(n - 1)) : "refused by rgpud";
  if (buf[0] != kIpcOk) return "rgpud sent an unexpected reply to an IPC request";
  return "";
}

ssize_t send_control(int sock, const void* data, size_t n, int fd) {
  iovec v{const_cast<void*>(data), n};
  char ctrl[CMSG_SPACE(sizeof(int))] = {};
  msghdr m{};
  m.msg_iov = &v;
  m.msg_iovlen = 1;
  if (fd >= 0) {
    m.msg_control = ctrl;
    m.msg_controllen = sizeof ctrl;
    cmsghdr* c = CMSG_FIRSTHDR(&m);
    c->cmsg_level = SOL_SOCKET;
    c->cmsg_type = SCM_RIGHTS;
    c->cmsg_len = CMSG_LEN(sizeof(int));
    memcpy(CMSG_DATA(c), &fd, sizeof fd);
  }
  return sendmsg(sock, &m, MSG_NOSIGNAL);
}

ssize_t recv_control(int sock, void* buf, size_t cap, int& fd, int flags) {
  fd = -1;
  iovec v{buf, cap};
  alignas(cmsghdr) char ctrl[CMSG_SPACE(4 * sizeof(int))] = {};
  msghdr m{};
  m.msg_iov = &v;
  m.msg_iovlen = 1;
  m.msg_control = ctrl;
  m.msg_controllen = sizeof ctrl;
  ssize_t n = recvmsg(sock, &m, flags | MSG_CMSG_CLOEXEC);
  if (n < 0) return n;
  for (cmsghdr* c = CMSG_FIRSTHDR(&m); c; c = CMSG_NXTHDR(&m, c)) {
    if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS) continue;
    size_t count = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
    for (size_t i = 0; i < count; ++i) {
      int got;
      memcpy(&got, CMSG_DATA(c) + i * sizeof(int), sizeof got);
      if (fd < 0)
        fd = got;
      else
        close(got);  // one descriptor per message; the rest are not ours to keep
    }
  }
  if (m.msg_flags & MSG_TRUNC) {  // a message larger than any of ours: not a valid request
    if (fd >= 0) close(fd);
    fd = -1;
    errno = EMSGSIZE;
    return -1;
  }
  return n;
}

IpcExports::IpcExports() { random_bytes(identity_.data(), identity_.size()); }

IpcExports::~IpcExports() {
  for (auto& [id, e] : exports_) close(e.fd);
}

std::string IpcExports::over_limit(pid_t owner) const {
  const size_t mine = size_of(owner);
  if (limits_.per_session && mine >= limits_.per_session)
    return "rgpud already keeps " + std::to_string(mine) +
           " IPC exports of this session, its limit (--client-max-ipc-exports " +
           std::to_string(limits_.per_session) +
           "); an export ends when its memory is freed or its event destroyed";
  auto user = user_of_.find(owner);
  if (limits_.per_user && user != user_of_.end()) {
    auto n = per_user_.find(user->second);
    const size_t theirs = n == per_user_.end() ? 0 : n->second;
    if (theirs >= limits_.per_user)
      return "rgpud already keeps " + std::to_string(theirs) +
             " IPC exports of this user's sessions, its limit (--max-ipc-exports-per-user " +
             std::to_string(limits_.per_user) +
             "); an export ends when its memory is freed or its event destroyed";
  }
  if (exports_.size() >= limits_.total)
    return "rgpud keeps " + std::to_string(exports_.size()) +
           " IPC exports of all sessions, each an open descriptor, as many as its descriptor "
           "limit allows (" +
           limits_.total_why + ")";
  return "";
}

IpcExports::Exports::iterator IpcExports::erase(Exports::iterator it) {
  close(it->second.fd);
  auto n = per_owner_.find(it->second.owner);
  if (n != per_owner_.end() && --n->second == 0) per_owner_.erase(n);
  if (auto u = user_of_.find(it->second.owner); u != user_of_.end()) {
    auto k = per_user_.find(u->second);
    if (k != per_user_.end() && --k->second == 0) per_user_.erase(k);
  }
  return exports_.erase(it);
}

std::string IpcExports::do_export(pid_t owner, const char* msg, size_t n, int fd, IpcToken& token) {
  if (fd < 0) return "an IPC export came without the memory's descriptor";
  if (n != 1 + sizeof(IpcMeta)) return "an IPC export request has the wrong size";
  Export e{owner, fd, {}};
  memcpy(&e.meta, msg + 1, sizeof e.meta);
  if (e.meta.size == 0 || e.meta.offset > UINT64_MAX - e.meta.size)
    return "an IPC export names an empty or overflowing range";
  if (e.meta.span == 0) e.meta.span = e.meta.offset + e.meta.size;
  if (e.meta.span < e.meta.offset + e.meta.size)
    return "an IPC export's range ends beyond the memory it names";
  if (std::string why = over_limit(owner); !why.empty()) {
    if (warned_.insert(owner).second)
      LOG_WARN("session process %d: IPC export refused (further refusals not logged): %s",
               static_cast<int>(owner), why.c_str());
    return why;
  }
  Id id;
  do {
    random_bytes(id.data(), id.size());
  } while (exports_.count(id));
  exports_.emplace(id, e);
  ++per_owner_[owner];
  if (auto u = user_of_.find(owner); u != user_of_.end()) ++per_user_[u->second];
  memcpy(token.data(), identity_.data(), 16);
  memcpy(token.data() + 16, id.data(), 16);
  return "";
}

std::string IpcExports::do_import(const char* msg, size_t n, const Export*& found) const {
  if (n != 1 + sizeof(IpcToken)) return "an IPC import request has the wrong size";
  const auto* t = reinterpret_cast<const uint8_t*>(msg + 1);
  if (memcmp(t, identity_.data(), 16) != 0)
    return "the IPC handle was made by another rgpud (server " + hex(t, 16) + "), not this one (" +
           hex(identity_.data(), 16) + ")";
  Id id;
  memcpy(id.data(), t + 16, 16);
  auto it = exports_.find(id);
  if (it == exports_.end())
    return "the IPC handle's export " + hex(id.data(), 16) +
           " does not exist (its memory was freed or its event destroyed, or its session ended "
           "or reset the device)";
  found = &it->second;
  return "";
}

std::string IpcExports::do_revoke(pid_t owner, const char* msg, size_t n) {
  if (n != 1 + sizeof(IpcToken) || memcmp(msg + 1, identity_.data(), 16) != 0)
    return "an IPC revoke request names no export of this rgpud";
  Id id;
  memcpy(id.data(), msg + 17, 16);
  auto it = exports_.find(id);
  if (it == exports_.end() || it->second.owner != owner)
    return "no IPC export " + hex(id.data(), 16) + " of this session";
  erase(it);
  return "";
}

void IpcExports::serve(pid_t owner, int sock, const char* msg, size_t n, int fd) {
  std::string why;
  std::string reply(1, kIpcOk);
  int reply_fd = -1;
  if (n == 0) {
    why = "an empty IPC request";
  } else if (msg[0] == kIpcExport) {
    IpcToken token;
    why = do_export(owner, msg, n, fd, token);
    if (why.empty()) {
      fd = -1;  // kept
      reply.append(reinterpret_cast<const char*>(token.data()), token.size());
    }
  } else if (msg[0] == kIpcImport) {
    const Export* e = nullptr;
    why = do_import(msg, n, e);
    if (e) {
      reply.append(reinterpret_cast<const char*>(&e->meta), sizeof e->meta);
      reply_fd = e->fd;
    }
  } else if (msg[0] == kIpcRevoke) {
    why = do_revoke(owner, msg, n);
  } else {
    why = "an unknown control request";
  }
  if (fd >= 0) close(fd);
  if (!why.empty()) {
    LOG_INFO("session process %d: %s", static_cast<int>(owner), why.c_str());
    reply = kIpcFail + why;
    reply_fd = -1;
  }
  send_control(sock, reply.data(), reply.size(), reply_fd);
}

void IpcExports::close_all() {
  for (auto& [id, e] : exports_) close(e.fd);
  exports_.clear();
  per_owner_.clear();
  user_of_.clear();
  per_user_.clear();
  warned_.clear();
}

void IpcExports::drop_owner(pid_t owner) {
  warned_.erase(owner);
  if (per_owner_.count(owner))
    for (auto it = exports_.begin(); it != exports_.end();)
      it = it->second.owner == owner ? erase(it) : std::next(it);
  user_of_.erase(owner);  // after the erases: they count down the user's exports
}

std::string ipc_export(int control, int fd, const IpcMeta& meta, IpcToken& token, int timeout_ms) {
  char msg[1 + sizeof meta];
  msg[0] = kIpcExport;
  memcpy(msg + 1, &meta, sizeof meta);
  if (send_control(control, msg, sizeof msg, fd) != static_cast<ssize_t>(sizeof msg))
    return std::string("cannot send an IPC export to rgpud: ") + strerror(errno);
  char buf[1024];
  ssize_t n = 0;
  int extra = -1;
  std::string why = await_reply(control, buf, sizeof buf, n, extra, timeout_ms);
  if (extra >= 0) close(extra);
  if (!why.empty()) return why;
  if (n != 1 + static_cast<ssize_t>(token.size())) return "rgpud's IPC export reply is malformed";
  memcpy(token.data(), buf + 1, token.size());
  return "";
}

std::string ipc_import(int control, const IpcToken& token, IpcMeta& meta, int& fd, int timeout_ms) {
  fd = -1;
  char msg[1 + sizeof token];
  msg[0] = kIpcImport;
  memcpy(msg + 1, token.data(), token.size());
  if (send_control(control, msg, sizeof msg, -1) != static_cast<ssize_t>(sizeof msg))
    return std::string("cannot send an IPC import to rgpud: ") + strerror(errno);
  char buf[1024];
  ssize_t n = 0;
  int got = -1;
  std::string why = await_reply(control, buf, sizeof buf, n, got, timeout_ms);
  if (why.empty() && (n != 1 + static_cast<ssize_t>(sizeof meta) || got < 0))
    why = "rgpud's IPC import reply is malformed";
  if (!why.empty()) {
    if (got >= 0) close(got);
    return why;
  }
  memcpy(&meta, buf + 1, sizeof meta);
  fd = got;
  return "";
}

std::string ipc_revoke(int control, const IpcToken& token, int timeout_ms) {
  char msg[1 + sizeof token];
  msg[0] = kIpcRevoke;
  memcpy(msg + 1, token.data(), token.size());
  if (send_control(control, msg, sizeof msg, -1) != static_cast<ssize_t>(sizeof msg))
    return std::string("cannot send an IPC revoke to rgpud: ") + strerror(errno);
  char buf[1024];
  ssize_t n = 0;
  int extra = -1;
  std::string why = await_reply(control, buf, sizeof buf, n, extra, timeout_ms);
  if (extra >= 0) close(extra);
  return why;
}

}  // namespace rgpu::server
