#include "server/supervisor.h"

#include <signal.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <map>

#include "common/log.h"
#include "server/session_process.h"

namespace rgpu::server {

Supervisor::Supervisor(const DaemonConfig& cfg, std::vector<backend::HostLedger*> ledgers)
    : cfg_(cfg), ledgers_(std::move(ledgers)), max_sessions_(cfg.max_sessions) {
  IpcLimits l;
  l.per_session = cfg.client_max_ipc_exports;
  l.per_user = cfg.max_ipc_exports_per_user;
  ipc_.set_limits(std::move(l));
}

size_t Supervisor::set_fd_limit(uint64_t limit, size_t open_now) {
  const uint64_t sessions = static_cast<uint64_t>(std::max(max_sessions_, 0));
  const uint64_t handshakes = static_cast<uint64_t>(std::max(cfg_.max_handshakes, 0));
  // Sessions: a control socket and a peer inbox; NVML query links (as many again): a control
  // socket; connections in their handshake: a control socket.
  const uint64_t reserve = open_now + 3 * sessions + handshakes + kFdSlack;
  const size_t budget = limit > reserve ? static_cast<size_t>(limit - reserve) : 0;
  IpcLimits l = ipc_.limits();
  l.total = budget;
  l.total_why = "rgpud's descriptor limit " + std::to_string(limit) + " less " +
                std::to_string(reserve) + " kept for " + std::to_string(sessions) +
                " sessions (--max-sessions), as many NVML links, " + std::to_string(handshakes) +
                " handshakes (--max-handshakes) and its own " +
                std::to_string(open_now + kFdSlack) +
                "; raise rgpud's hard limit (ulimit -Hn) or lower those";
  ipc_.set_limits(std::move(l));
  return budget;
}

void Supervisor::add(pid_t pid, int control, std::string peer, std::string source, bool local) {
  Child c;
  c.pid = pid;
  c.control = control;
  c.peer = std::move(peer);
  c.started = Clock::now();
  c.source = std::move(source);
  c.local = local;
  children_.push_back(std::move(c));
}

std::string Supervisor::make_handshake_room(const std::string& source, bool local) {
  // Those still in their handshake in this connection's budget, by source.  A killed one (its
  // deadline passed, or it was evicted) is dying and counts no more.
  std::map<std::string, std::vector<Child*>> pending;
  int total = 0;
  for (Child& c : children_) {
    if (c.admitted || c.killed || c.local != local) continue;
    pending[c.source].push_back(&c);
    ++total;
  }
  const size_t mine = pending.count(source) ? pending[source].size() : 0;
  const char* kind = local ? "this machine's" : "network";
  if (cfg_.max_handshakes_per_user > 0 &&
      mine >= static_cast<size_t>(cfg_.max_handshakes_per_user)) {
    ++refused_handshakes_;
    return source + " already has " + std::to_string(mine) +
           " connections in their handshake (--max-handshakes-per-user " +
           std::to_string(cfg_.max_handshakes_per_user) + ")";
  }
  if (total < cfg_.max_handshakes) return "";
  // The budget is full: the source holding the most gives up its newest handshake when it holds
  // more than this one would, so squatting from a few addresses cannot keep anyone out.
  auto top = std::max_element(pending.begin(), pending.end(), [](const auto& a, const auto& b) {
    return a.second.size() < b.second.size();
  });
  if (top == pending.end() || top->second.size() <= mine + 1) {
    ++refused_handshakes_;
    return std::to_string(total) + " " + kind +
           " connections are still in their handshake (--max-handshakes " +
           std::to_string(cfg_.max_handshakes) + ")";
  }
  Child* newest = *std::max_element(top->second.begin(), top->second.end(),
                                    [](Child* a, Child* b) { return a->started < b->started; });
  kill(newest->pid, SIGKILL);  // nothing is spent on a connection before it authenticates
  newest->killed = true;
  ++refused_handshakes_;
  evictions_.warn(newest->peer,
                  top->first + " holds the most of the " + std::to_string(total) + " " + kind +
                      " connections in their handshake (--max-handshakes " +
                      std::to_string(cfg_.max_handshakes) + "), to make room for " + source);
  return "";
}

void Supervisor::note_dropped(const std::string& peer, const std::string& why) {
  drops_.warn(peer, why);
}

void Supervisor::Throttled::warn(const std::string& peer, const std::string& why) {
  ++since;
  auto now = Clock::now();
  if (now - last < std::chrono::seconds(1)) return;
  LOG_WARN("dropping client %s%s: %s", peer.c_str(),
           since > 1 ? (" and " + std::to_string(since - 1) + " more").c_str() : "", why.c_str());
  last = now;
  since = 0;
}

void Supervisor::add_control_fds(std::vector<pollfd>& fds) const {
  for (const Child& c : children_)
    if (c.control >= 0) fds.push_back({c.control, POLLIN, 0});
}

std::string Supervisor::admit(const std::string& identity, bool query) const {
  int sessions = 0, mine = 0;
  for (const Child& c : children_) {
    if (!c.admitted || c.query != query) continue;
    ++sessions;
    if (c.identity == identity) ++mine;
  }
  const char* what = query ? " NVML query links" : " sessions";
  if (sessions >= max_sessions_)
    return "rgpud already serves " + std::to_string(sessions) + what +
           ", its limit (--max-sessions " + std::to_string(max_sessions_) + ")";
  if (cfg_.max_sessions_per_user > 0 && mine >= cfg_.max_sessions_per_user)
    return "rgpud already serves " + std::to_string(mine) + what + " for " + identity +
           ", its limit per user (--max-sessions-per-user " +
           std::to_string(cfg_.max_sessions_per_user) + ")";
  return "";
}

std::string Supervisor::enter(Child& c, const std::string& identity) {
  auto [at, added] = user_numbers_.emplace(identity, 0);
  if (added) at->second = static_cast<uint32_t>(user_numbers_.size());
  ipc_.set_user(c.pid, at->second);
  if (!users_ || users_->enter(c.pid, at->second)) return "";
  // Without its entry a session would escape its user's limits: its memory and its share of the
  // decompression slots (the session learns its user's number from the entry).
  if (!cfg_.mem_limit_per_user && !cfg_.max_decompressions_per_user) return "";
  return "rgpud's table of per-user accounts is full (" + std::to_string(UserAccounts::kEntries) +
         " sessions; --mem-limit-per-user, --max-decompressions-per-user)";
}

void Supervisor::serve_controls(const std::vector<pollfd>& fds, size_t first) {
  for (size_t i = first; i < fds.size(); ++i) {
    if (!fds[i].revents) continue;
    auto it = std::find_if(children_.begin(), children_.end(),
                           [&](const Child& c) { return c.control == fds[i].fd; });
    if (it == children_.end()) continue;
    char buf[1024];
    int fd = -1;
    ssize_t n = recv_control(it->control, buf, sizeof buf, fd, MSG_DONTWAIT);
    if (n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR)) {
      close(it->control);  // the session process is ending; reap() collects it
      it->control = -1;
      ipc_.drop_owner(it->pid);
      peers_.drop_owner(it->pid);
      continue;
    }
    if (n > 0 && buf[0] == kPeerRegister && it->admitted) {  // server/peer_routes.h
      peers_.serve_register(it->pid, it->control, buf, static_cast<size_t>(n), fd);
      continue;
    }
    if (n > 0 && buf[0] == kPeerHandoff && !it->admitted) {
      peers_.serve_handoff(it->control, buf, static_cast<size_t>(n), fd);
      continue;
    }
    const bool asks = n > 0 && (buf[0] == kAdmitRequest || buf[0] == kAdmitQuery);
    if (n > 0 && it->admitted && !asks) {  // CUDA IPC (server/ipc_exports.h)
      ipc_.serve(it->pid, it->control, buf, static_cast<size_t>(n), fd);
      continue;
    }
    if (fd >= 0) close(fd);
    if (!asks || it->admitted) continue;
    std::string reply;
    if (it->killed) {
      reply = std::string(1, kAdmitNo) + "the handshake took too long (--handshake-timeout)";
    } else {
      std::string identity(buf + 1, static_cast<size_t>(n - 1));
      const bool query = buf[0] == kAdmitQuery;
      std::string why = admit(identity, query);
      if (why.empty() && !query) why = enter(*it, identity);
      if (why.empty()) {
        it->admitted = true;
        it->query = query;
        it->identity = identity;
        reply = std::string(1, kAdmitYes);
      } else {
        reply = kAdmitNo + why;
      }
    }
    send(it->control, reply.data(), reply.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
  }
}

int Supervisor::next_deadline_ms() const {
  int best = -1;
  auto now = Clock::now();
  for (const Child& c : children_) {
    if (c.admitted || c.killed) continue;
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
                    c.started + std::chrono::milliseconds(cfg_.handshake_timeout_ms) - now)
                    .count();
    int ms = static_cast<int>(std::max<long long>(0, left)) + 1;
    if (best < 0 || ms < best) best = ms;
  }
  return best;
}

void Supervisor::enforce_deadlines() {
  auto now = Clock::now();
  for (Child& c : children_) {
    if (c.admitted || c.killed ||
        now - c.started < std::chrono::milliseconds(cfg_.handshake_timeout_ms))
      continue;
    LOG_WARN("client %s: no complete handshake within %d ms (--handshake-timeout); dropped",
             c.peer.c_str(), cfg_.handshake_timeout_ms);
    kill(c.pid, SIGKILL);
    c.killed = true;
  }
}

void Supervisor::reap() {
  int status;
  for (pid_t p; (p = waitpid(-1, &status, WNOHANG)) > 0;) {
    for (auto* l : ledgers_) l->release_process(p);
    if (decompressions_) decompressions_->release_process(p);
    if (users_) users_->leave(p);
    ipc_.drop_owner(p);
    peers_.drop_owner(p);
    auto it = std::find_if(children_.begin(), children_.end(),
                           [&](const Child& c) { return c.pid == p; });
    if (it == children_.end()) continue;
    if (WIFSIGNALED(status) && !it->killed && WTERMSIG(status) != SIGTERM)
      LOG_WARN("session process %d (client %s) died of signal %d", p, it->peer.c_str(),
               WTERMSIG(status));
    if (it->control >= 0) close(it->control);
    children_.erase(it);
  }
}

void Supervisor::close_all_in_child() {
  for (Child& c : children_)
    if (c.control >= 0) close(c.control);
  children_.clear();
  peers_.close_all();
  ipc_.close_all();  // other sessions' exported memory is not this session's to hold
}

void Supervisor::wait_for_all(int sigfd, Clock::time_point deadline) {
  for (;;) {
    reap();
    if (children_.empty()) return;
    auto left =
        std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
    if (left <= 0) return;
    pollfd p{sigfd, POLLIN, 0};
    poll(&p, 1, static_cast<int>(std::min<long long>(left, 100)));
    signalfd_siginfo si;
    while (read(sigfd, &si, sizeof si) == sizeof si) {
    }
  }
}

int Supervisor::shut_down(int sigfd, int timeout_ms) {
  LOG_NOTICE("stopping; ending %zu session(s)", children_.size());
  for (const Child& c : children_) {
    kill(c.pid, SIGTERM);
    kill(c.pid, SIGCONT);  // a stopped session would not act on SIGTERM before it runs again
  }
  wait_for_all(sigfd, Clock::now() + std::chrono::milliseconds(timeout_ms));
  if (children_.empty()) return 0;
  LOG_WARN("%zu session(s) did not end within %d ms (--shutdown-timeout); killing them",
           children_.size(), timeout_ms);
  for (const Child& c : children_) kill(c.pid, SIGKILL);
  wait_for_all(sigfd, Clock::now() + std::chrono::seconds(5));
  if (children_.empty()) return 0;
  LOG_ERROR("%zu session process(es) survived SIGKILL (stuck in the kernel?)", children_.size());
  return 1;
}

}  // namespace rgpu::server
