// The daemon's view of its session processes: which are still in their handshake (the
// pre-authentication budget and its deadline), which are admitted sessions (the session limits),
// reaping, and ending them all at shutdown.
#pragma once

#include <poll.h>
#include <sys/types.h>

#include <chrono>
#include <map>
#include <string>
#include <vector>

#include "backend/host/host_ledger.h"
#include "server/daemon.h"
#include "server/decompressions.h"
#include "server/ipc_exports.h"
#include "server/peer_routes.h"
#include "server/user_accounts.h"

namespace rgpu::server {

class Supervisor {
 public:
  Supervisor(const DaemonConfig& cfg, std::vector<backend::HostLedger*> ledgers);

  void set_max_sessions(int n) { max_sessions_ = n; }
  // The daemon may have `limit` descriptors open and has `open_now` (listeners, signalfd, ...).
  // CUDA IPC exports, one kept descriptor each, may use what is left once room is reserved for
  // everything else the daemon may have to hold at its limits: per session its control socket and
  // peer inbox, per NVML query link and per handshake a control socket, and kFdSlack for the
  // client being accepted (its connection and socketpair) and what the daemon opens briefly.
  // Returns that budget (0: no exports fit).  Call after set_max_sessions.
  size_t set_fd_limit(uint64_t limit, size_t open_now);
  static constexpr size_t kFdSlack = 64;
  // The decompression slots whose holders reap() frees (server/decompressions.h).
  void set_decompressions(DecompressionSlots* slots) { decompressions_ = slots; }
  // The per-user accounts (server/user_accounts.h): an admitted session gets its entry, which
  // reap() clears.
  void set_user_accounts(UserAccounts* users) { users_ = users; }
  // A new session process, in its handshake; `control` is the daemon's end of its control socket.
  // `source` is whom it counts under before it authenticates (PendingConnection::source), `local`
  // whether it came over a co-located transport (shared memory).
  void add(pid_t pid, int control, std::string peer, std::string source, bool local);
  // Whether a new connection from `source` may start its handshake: "" when it may (possibly
  // after ending the newest handshake of the source holding the most, when the budget is full and
  // `source` holds fewer), else why not, naming the option.  Local and network connections have
  // budgets of their own (--max-handshakes each), so strangers on the network never keep this
  // machine's users out; each source holds at most --max-handshakes-per-user of one.
  std::string make_handshake_room(const std::string& source, bool local);
  // Logs (at most once a second) that a connection was dropped, and why.
  void note_dropped(const std::string& peer, const std::string& why);
  // Connections refused before authentication since the start, by reason (metrics, tests).
  uint64_t refused_handshakes() const { return refused_handshakes_; }

  // Appends the control sockets to poll; serve_controls answers admission requests among them.
  void add_control_fds(std::vector<pollfd>& fds) const;
  void serve_controls(const std::vector<pollfd>& fds, size_t first);
  // Milliseconds until the next handshake deadline (-1: none).
  int next_deadline_ms() const;
  // Kills session processes whose handshake outlived --handshake-timeout.
  void enforce_deadlines();
  // Collects ended session processes and returns what the host ledger still charged to them.
  void reap();

  // In a freshly forked session process: closes the daemon's ends of the other control sockets.
  void close_all_in_child();
  // CUDA IPC exports kept for the sessions (tests).
  const IpcExports& ipc_exports() const { return ipc_; }
  // SIGTERM (and SIGCONT, for stopped ones) to every session; SIGKILL to those left after
  // `timeout_ms`.  Returns the daemon's exit code: 0, or 1 when a session would not die.
  int shut_down(int sigfd, int timeout_ms);

 private:
  using Clock = std::chrono::steady_clock;
  struct Child {
    pid_t pid = -1;
    int control = -1;  // -1 once the session closed it
    std::string peer;
    Clock::time_point started;
    std::string source;  // whom it counts under in its handshake
    bool local = false;  // came over a co-located transport
    bool admitted = false;
    bool killed = false;  // handshake deadline passed: SIGKILL sent
    std::string identity;
    bool query = false;  // an NVML query link (server/nvml.h), counted apart from sessions
  };
  std::string admit(const std::string& identity, bool query) const;
  // Admits session `c` of `identity`: its user's number, its per-user entry; "" or why not.
  std::string enter(Child& c, const std::string& identity);
  void wait_for_all(int sigfd, Clock::time_point deadline);

  const DaemonConfig& cfg_;
  std::vector<backend::HostLedger*> ledgers_;
  DecompressionSlots* decompressions_ = nullptr;
  UserAccounts* users_ = nullptr;
  std::map<std::string, uint32_t> user_numbers_;  // identity -> its number in users_ (from 1)
  int max_sessions_;
  std::vector<Child> children_;
  IpcExports ipc_;    // what sessions exported for CUDA IPC
  PeerRoutes peers_;  // peer links to the sessions that issued their tickets
  // A warning logged at most once a second, with the count of those not logged.
  struct Throttled {
    Clock::time_point last{};
    size_t since = 0;
    void warn(const std::string& peer, const std::string& why);
  };
  Throttled drops_, evictions_;
  uint64_t refused_handshakes_ = 0;
};

}  // namespace rgpu::server
