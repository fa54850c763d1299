// CUDA IPC between sessions of one rgpud: the daemon keeps what its sessions export.
//
// A session that exports memory sends the daemon, over its control socket (SOCK_SEQPACKET), the
// memory's file descriptor (SCM_RIGHTS) and where in that file the memory lies; the daemon keeps
// the descriptor under a random export id and answers with a token: its own random identity
// followed by that id.  A session of the same daemon that imports the token gets a duplicate of the
// descriptor back, to map in its own client's window.  A token made by another rgpud is refused by
// name; an export ends with the session that made it (the daemon drops it when it reaps the
// process) or when the session withdraws it (the exported allocation was freed), so an import of
// it afterwards is an error.
//
// Every export keeps a descriptor open in the daemon, so exports are bounded twice: per session
// (--client-max-ipc-exports) and all together by the daemon's descriptor budget (its limit less
// what it keeps for the sessions and handshakes it may still have to serve: see
// Supervisor::set_fd_limit), so one tenant's exports never leave the daemon without the
// descriptors that accepting a new client takes.
#pragma once

#include <sys/types.h>

#include <array>
#include <cstddef>
#include <cstdint>
#include <map>
#include <set>
#include <string>

namespace rgpu::server {

// The daemon's identity followed by the export id: what the client keeps inside its 64-byte handle.
using IpcToken = std::array<uint8_t, 32>;

// Where the exported memory lies in the file whose descriptor travels with it: [offset,
// offset + size) of the `span` bytes an importer maps (a backend may have to map more than the
// export: the cuda backend maps a whole cuMemCreate allocation).
struct IpcMeta {
  uint64_t offset = 0;
  uint64_t size = 0;
  int32_t device = 0;
  uint32_t kind = 0;  // what the descriptor is (backend-defined; checked by the importer)
  uint64_t span = 0;  // 0: offset + size
};

// What bounds the exports a daemon keeps.
struct IpcLimits {
  size_t per_session = 0;   // --client-max-ipc-exports (0: no limit)
  size_t per_user = 0;      // --max-ipc-exports-per-user (0: no limit)
  size_t total = SIZE_MAX;  // descriptors all sessions' exports may keep together
  std::string total_why;    // how `total` was reached, for the refusal
};

// Control-socket messages (after admission).  Requests: kIpcExport + IpcMeta, with the descriptor
// attached; kIpcImport + IpcToken; kIpcRevoke + IpcToken (the exporter's own).  Replies: kIpcOk
// (+ IpcToken for an export; + IpcMeta and the descriptor for an import), or kIpcFail + the reason.
constexpr char kIpcExport = 'X';
constexpr char kIpcImport = 'I';
constexpr char kIpcRevoke = 'R';
constexpr char kIpcOk = 'y';
constexpr char kIpcFail = 'n';

// The daemon's side.  Not thread-safe (the daemon's loop owns it).
class IpcExports {
 public:
  IpcExports();  // a fresh random identity
  ~IpcExports();
  IpcExports(const IpcExports&) = delete;
  IpcExports& operator=(const IpcExports&) = delete;

  // Answers one request `msg` (n bytes, starting with kIpcExport/kIpcImport/kIpcRevoke) that
  // session process `owner` sent on `sock`; `fd` is the descriptor it attached (-1: none), taken
  // over (kept or closed).
  void serve(pid_t owner, int sock, const char* msg, size_t n, int fd);
  // Exports beyond a limit are refused, naming it (logged once per session).
  void set_limits(IpcLimits limits) { limits_ = std::move(limits); }
  const IpcLimits& limits() const { return limits_; }
  // Session process `owner` belongs to user `user` (Supervisor's numbers): its exports count
  // towards the user's limit.
  void set_user(pid_t owner, uint32_t user) { user_of_[owner] = user; }
  // The session ended: its exports go, and their descriptors are closed.
  void drop_owner(pid_t owner);
  // Closes every kept descriptor and forgets the exports (in a freshly forked session process).
  void close_all();

  size_t size() const { return exports_.size(); }
  size_t size_of(pid_t owner) const {
    auto it = per_owner_.find(owner);
    return it == per_owner_.end() ? 0 : it->second;
  }
  const std::array<uint8_t, 16>& identity() const { return identity_; }

 private:
  struct Export {
    pid_t owner;
    int fd;
    IpcMeta meta;
  };
  using Exports = std::map<std::array<uint8_t, 16>, Export>;
  std::string do_export(pid_t owner, const char* msg, size_t n, int fd, IpcToken& token);
  // Why `owner` may not keep another export ("" when it may).
  std::string over_limit(pid_t owner) const;
  Exports::iterator erase(Exports::iterator it);  // closes its descriptor
  std::string do_import(const char* msg, size_t n, const Export*& found) const;
  std::string do_revoke(pid_t owner, const char* msg, size_t n);

  std::array<uint8_t, 16> identity_{};
  Exports exports_;
  std::map<pid_t, size_t> per_owner_;    // exports kept per session
  std::map<pid_t, uint32_t> user_of_;    // the user of each session (set_user)
  std::map<uint32_t, size_t> per_user_;  // exports kept per user
  std::set<pid_t> warned_;               // sessions whose refusal by a limit was logged
  IpcLimits limits_;
};

// The session's side: one request and its reply, within `timeout_ms`.  Each returns "" on success,
// else why not.  The caller lets one thread at a time use the control socket.
std::string ipc_export(int control, int fd, const IpcMeta& meta, IpcToken& token,
                       int timeout_ms = 5000);
// On success `fd` is a new descriptor (close-on-exec) the caller owns.
std::string ipc_import(int control, const IpcToken& token, IpcMeta& meta, int& fd,
                       int timeout_ms = 5000);
std::string ipc_revoke(int control, const IpcToken& token, int timeout_ms = 5000);

// Sends/receives one control message with at most one descriptor attached.  recv_control returns
// the byte count (0: the peer closed; -1: error, errno set) and the descriptor in `fd` (-1: none;
// any extra descriptors are closed).
ssize_t send_control(int sock, const void* data, size_t n, int fd);
// Waits at most timeout_ms for the reply to a control request and receives it ("" when it is
// kIpcOk; else why not: the daemon's reason after kIpcFail, a timeout, a closed socket).
std::string await_reply(int control, char* buf, size_t cap, ssize_t& n, int& fd, int timeout_ms);
// Fills p with n random bytes from the kernel (aborts when there is no randomness).
void random_bytes(uint8_t* p, size_t n);
ssize_t recv_control(int sock, void* buf, size_t cap, int& fd, int flags);

}  // namespace rgpu::server
