// CUDA IPC between sessions of one rgpud: the daemon keeps what its sessions export.
//
// A session that exports memory sends the daemon, over its control socket (SOCK_SEQPACKET), the
// memory's file descriptor (SCM_RIGHTS) and where in that file the memory lies; the daemon keeps
// the descriptor under a random export id and answers with a token: its own random identity
// followed by that id.  A session of the same daemon that imports the token gets a duplicate of the
// descriptor back, to map in its own client's window.  A token made by another rgpud is refused by
// name; an export ends with the session that made it (the daemon drops it when it reaps the
// process), so an import of it afterwards is an error.
#pragma once

#include <sys/types.h>

#include <array>
#include <cstdint>
#include <map>
#include <string>

namespace rgpu::server {

// The daemon's identity followed by the export id: what the client keeps inside its 64-byte handle.
using IpcToken = std::array<uint8_t, 32>;

// Where the exported memory lies in the file whose descriptor travels with it.
struct IpcMeta {
  uint64_t offset = 0;
  uint64_t size = 0;
  int32_t device = 0;
  uint32_t kind = 0;  // what the descriptor is (backend-defined; checked by the importer)
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
  // The session ended: its exports go, and their descriptors are closed.
  void drop_owner(pid_t owner);
  // Closes every kept descriptor and forgets the exports (in a freshly forked session process).
  void close_all();

  size_t size() const { return exports_.size(); }
  const std::array<uint8_t, 16>& identity() const { return identity_; }

 private:
  struct Export {
    pid_t owner;
    int fd;
    IpcMeta meta;
  };
  std::string do_export(pid_t owner, const char* msg, size_t n, int fd, IpcToken& token);
  std::string do_import(const char* msg, size_t n, const Export*& found) const;
  std::string do_revoke(pid_t owner, const char* msg, size_t n);

  std::array<uint8_t, 16> identity_{};
  std::map<std::array<uint8_t, 16>, Export> exports_;
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
