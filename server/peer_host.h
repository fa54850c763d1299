// Server-to-server copies, the passive end (docs/architecture.md, "Server-to-server copies"): the
// session whose GPU is not the copy's stream's issues a one-time ticket for a range of its memory
// (PeerTicket), and serves the other server's peer link that shows it: PeerAttach (the secret,
// compared in constant time, once), then PeerWrite... + PeerFinish (the peer writes the range) or
// PeerRead (it reads it).  Links arrive through rgpud (server/peer_routes.h) on the session's
// inbox; each is served on a thread of its own with staging buffers from the session's pool.
#pragma once

#include <atomic>
#include <chrono>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "backend/executor.h"
#include "proto/messages.h"
#include "server/peer_pipe.h"
#include "transport/connection.h"

namespace rgpu::server {

class PeerHost {
 public:
  // `control`: the session's control socket to rgpud; `timeout_s`: a link that stays silent
  // this long mid-copy is dropped.
  PeerHost(backend::Executor& exec, StagingPool& pool, int control, int timeout_s);
  ~PeerHost() { stop(); }
  PeerHost(const PeerHost&) = delete;
  PeerHost& operator=(const PeerHost&) = delete;

  static constexpr uint32_t kTicketMs = 600000;  // a copy may wait behind its stream's work
  // A ticket for rows already checked against the session's allocations (the dispatcher's call:
  // it alone uses the control socket).
  backend::Status issue(const PeerRows& rows, bool write, proto::PeerTicketRep& rep);
  // The session ends: links are shut down, threads joined, tickets forgotten.
  void stop();

 private:
  using Clock = std::chrono::steady_clock;
  struct Ticket {
    PeerRows rows;
    bool write;
    proto::PeerSecret secret;
    Clock::time_point expires;
  };
  struct Link {
    std::unique_ptr<transport::Connection> conn;
    std::thread thread;
    std::atomic<bool> done{false};
  };
  void inbox_loop();
  void accept(const char* msg, int fd);
  void serve(Link& link, Ticket t, uint64_t attach_id);
  void reap_done();  // joins finished link threads (mu_ held)

  backend::Executor& exec_;
  StagingPool& pool_;
  const int control_;
  const int timeout_s_;
  int inbox_ = -1;  // the session's end; rgpud holds the other
  std::thread inbox_thread_;
  std::mutex mu_;  // tickets_, links_, stopping_; never held across a backend call or a wait
  std::map<proto::PeerTicketId, Ticket> tickets_;
  std::vector<std::unique_ptr<Link>> links_;
  bool stopping_ = false;
};

}  // namespace rgpu::server
