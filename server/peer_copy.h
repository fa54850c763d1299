// Server-to-server copies, the active end (docs/architecture.md, "Server-to-server copies"): the
// session whose stream runs the copy links to the other server (HelloReq::purpose PeerLink, the
// client's ticket in PeerAttach) and pushes its rows there (PeerWrite... PeerFinish) or pulls the
// remote rows (PeerRead).  Each copy runs on a thread of its own, never on the dispatcher and
// never in a host function: the session holds the stream at a gate and opens it when `done` has
// run (see Session::on(PeerCopyMsg)).
#pragma once

#include <atomic>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "backend/executor.h"
#include "proto/messages.h"
#include "server/peer_pipe.h"
#include "transport/connection.h"

namespace rgpu::server {

struct PeerJob {
  PeerRows local;
  uint64_t remote_bytes = 0;  // the ticket's rows, packed (width * height)
  bool push = false;          // local -> remote
  uint64_t after_event = 0;   // a private event: the stream's earlier work is done (destroyed here)
  std::string endpoint;       // "host:port" of the passive rgpud
  std::string remote_name;    // for messages
  proto::PeerTicketId ticket{};
  proto::PeerSecret secret{};
};

class PeerCopier {
 public:
  // `token`: what the peer link answers a token challenge with (rgpud's own --token-file);
  // `timeout_s`: connecting, the handshake, and any silence mid-copy.
  PeerCopier(backend::Executor& exec, StagingPool& pool, std::optional<std::string> token,
             int timeout_s);
  ~PeerCopier() { stop(); }
  PeerCopier(const PeerCopier&) = delete;
  PeerCopier& operator=(const PeerCopier&) = delete;

  // Runs `job` on a thread of its own; `done(status)` is called on that thread when it ends.
  void start(PeerJob job, std::function<void(const backend::Status&)> done);
  // The session ends: links are shut down (copies fail), threads joined.
  void stop();

 private:
  struct Run {
    std::thread thread;
    std::atomic<bool> done{false};
    std::mutex mu;
    transport::Connection* conn = nullptr;  // while linked
    bool cancelled = false;
  };
  backend::Status copy(Run& run, const PeerJob& job);
  backend::Status transfer(Run& run, const PeerJob& job, transport::Connection& conn,
                           uint64_t stream);

  backend::Executor& exec_;
  StagingPool& pool_;
  const std::optional<std::string> token_;
  const int timeout_s_;
  std::mutex mu_;
  std::vector<std::unique_ptr<Run>> runs_;
  bool stopping_ = false;
};

}  // namespace rgpu::server
