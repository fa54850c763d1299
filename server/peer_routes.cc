#include "server/peer_routes.h"

#include <fcntl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstring>

#include "common/log.h"
#include "server/ipc_exports.h"

namespace rgpu::server {

namespace {

void answer(int sock, const std::string& why) {
  std::string reply = why.empty() ? std::string(1, kIpcOk) : kIpcFail + why;
  send(sock, reply.data(), reply.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
}

}  // namespace

void PeerRoutes::expire() {
  auto now = Clock::now();
  for (auto it = routes_.begin(); it != routes_.end();)
    it = it->second.expires <= now ? routes_.erase(it) : std::next(it);
}

void PeerRoutes::serve_register(pid_t owner, int sock, const char* msg, size_t n, int fd) {
  expire();
  if (fd >= 0) {
    fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);  // the daemon never waits on a session
    auto [it, fresh] = inboxes_.emplace(owner, fd);
    if (!fresh) {
      close(it->second);
      it->second = fd;
    }
  }
  proto::PeerTicketId id;
  uint32_t ms = 0;
  if (n != 1 + id.size() + sizeof ms) return answer(sock, "malformed peer ticket registration");
  memcpy(id.data(), msg + 1, id.size());
  memcpy(&ms, msg + 1 + id.size(), sizeof ms);
  if (!inboxes_.count(owner)) return answer(sock, "no inbox for peer links was given");
  size_t mine = 0;
  for (const auto& [k, r] : routes_) mine += r.owner == owner;
  if (mine >= kMaxRoutesPerSession)
    return answer(
        sock, "too many outstanding peer tickets (" + std::to_string(kMaxRoutesPerSession) + ")");
  routes_[id] = Route{owner, Clock::now() + std::chrono::milliseconds(ms)};
  answer(sock, "");
}

void PeerRoutes::serve_handoff(int sock, const char* msg, size_t n, int fd) {
  expire();
  std::string why;
  if (n != kPeerHandoffBytes || fd < 0) {
    why = "malformed peer link hand-off";
  } else {
    proto::PeerTicketId id;
    memcpy(id.data(), msg + 1, id.size());
    auto it = routes_.find(id);
    if (it == routes_.end()) {
      why = "unknown, used or expired peer ticket";
    } else {
      pid_t owner = it->second.owner;
      routes_.erase(it);  // one use
      auto in = inboxes_.find(owner);
      if (in == inboxes_.end() || send_control(in->second, msg, n, fd) != static_cast<ssize_t>(n))
        why = "the session that issued the peer ticket is gone or busy";
    }
  }
  if (fd >= 0) close(fd);
  answer(sock, why);
}

void PeerRoutes::drop_owner(pid_t owner) {
  for (auto it = routes_.begin(); it != routes_.end();)
    it = it->second.owner == owner ? routes_.erase(it) : std::next(it);
  auto in = inboxes_.find(owner);
  if (in != inboxes_.end()) {
    close(in->second);
    inboxes_.erase(in);
  }
}

void PeerRoutes::close_all() {
  for (auto& [pid, fd] : inboxes_) close(fd);
  inboxes_.clear();
  routes_.clear();
}

std::string peer_register(int control, const proto::PeerTicketId& id, uint32_t expires_ms,
                          int inbox, int timeout_ms) {
  char msg[1 + 16 + 4];
  msg[0] = kPeerRegister;
  memcpy(msg + 1, id.data(), id.size());
  memcpy(msg + 1 + id.size(), &expires_ms, sizeof expires_ms);
  if (send_control(control, msg, sizeof msg, inbox) != static_cast<ssize_t>(sizeof msg))
    return std::string("cannot register a peer ticket with rgpud: ") + strerror(errno);
  char buf[1024];
  ssize_t n = 0;
  int extra = -1;
  std::string why = await_reply(control, buf, sizeof buf, n, extra, timeout_ms);
  if (extra >= 0) close(extra);
  return why;
}

std::string peer_handoff(int control, const proto::PeerTicketId& id, const proto::Nonce& nonce,
                         uint64_t request_id, int link, bool tls, int timeout_ms) {
  char msg[kPeerHandoffBytes];
  msg[0] = kPeerHandoff;
  memcpy(msg + 1, id.data(), id.size());
  memcpy(msg + 1 + id.size(), nonce.data(), nonce.size());
  memcpy(msg + 1 + id.size() + nonce.size(), &request_id, sizeof request_id);
  msg[kPeerHandoffBytes - 1] = tls ? 1 : 0;
  if (send_control(control, msg, sizeof msg, link) != static_cast<ssize_t>(sizeof msg))
    return std::string("cannot hand a peer link to rgpud: ") + strerror(errno);
  char buf[1024];
  ssize_t n = 0;
  int extra = -1;
  std::string why = await_reply(control, buf, sizeof buf, n, extra, timeout_ms);
  if (extra >= 0) close(extra);
  return why;
}

}  // namespace rgpu::server
