#include "server/session_process.h"

#include <fcntl.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include "backend/cuda/cuda_executor.h"
#include "common/cuda_errors.h"
#include "common/log.h"
#include "server/handshake.h"
#include "server/nvml.h"
#include "server/output_capture.h"
#include "server/peer_routes.h"
#include "server/session.h"
#include "server/tls_gate.h"

namespace rgpu::server {
namespace {

constexpr int kTransportHandshakeSec = 10;

// Asks the daemon whether this authenticated client may have a session; "" when admitted.
std::string ask_daemon(int control, const std::string& identity, bool query) {
  std::string msg = (query ? kAdmitQuery : kAdmitRequest) + identity;
  if (send(control, msg.data(), msg.size(), MSG_NOSIGNAL) != static_cast<ssize_t>(msg.size()))
    return "rgpud is shutting down";
  pollfd p{control, POLLIN, 0};
  char buf[1024];
  ssize_t n = poll(&p, 1, 10000) == 1 ? recv(control, buf, sizeof buf, 0) : -1;
  if (n <= 0) return "rgpud did not admit the session (it is shutting down or overloaded)";
  if (buf[0] == kAdmitYes) return "";
  return n > 1 ? std::string(buf + 1, static_cast<size_t>(n - 1)) : "refused by rgpud";
}

bool is_query(const proto::HelloReq& h) {
  return h.purpose == static_cast<uint32_t>(proto::LinkPurpose::Queries);
}

bool is_peer_link(const proto::HelloReq& h) {
  return h.purpose == static_cast<uint32_t>(proto::LinkPurpose::PeerLink);
}

// A peer link (another rgpud copying, server/peer_routes.h): reads its PeerAttach (the ticket's id
// and the peer's nonce) and hands the connection to the session that issued the ticket, which
// runs the proofs of the peer key (server/peer_host.h); or tells the peer why not.
void hand_off_peer_link(transport::Connection& conn, int control, bool tls) {
  using namespace proto;
  channel::Channel ch(conn);
  conn.set_recv_timeout(10);
  conn.set_send_timeout(10);
  FrameHeader h;
  std::vector<uint8_t> body;
  if (!ch.read_frame(h, body, channel::Channel::Wait::TimedOrEof)) return;
  if (h.type != static_cast<uint16_t>(MsgId::PeerAttach) || h.payload_len) {
    LOG_WARN("peer link from %s: its first request is not PeerAttach", conn.peer().c_str());
    return;
  }
  auto q = decode_message<PeerAttachReq>(body.data(), body.size());
  // The session takes the socket itself; TLS state cannot travel with it, so a TLS link is
  // routed before its handshake (PeerRoute, server/tls_gate.h).
  std::string why = tls ? "a peer link to an rgpud with TLS begins with PeerRoute, in plain"
                        : peer_handoff(control, q.ticket, q.nonce, h.request_id, conn.fd());
  if (why.empty()) return;  // the session answers
  LOG_WARN("peer link from %s refused: %s", conn.peer().c_str(), why.c_str());
  ch.send(h.type, kFlagReply, h.request_id, encode_error_reply(err::NotPermitted, why));
}

}  // namespace

void run_session_process(const SessionProcessConfig& cfg,
                         std::unique_ptr<transport::PendingConnection> pending,
                         const transport::Provider& provider, int control) {
  // Until the client has authenticated, nothing is spent on it: no executor (GPU context, host
  // ledger slot), no page-locked memory.  The daemon kills this process if the handshake takes
  // longer than --handshake-timeout, however slowly the peer trickles its bytes.
  std::unique_ptr<transport::Connection> conn;
  try {
    conn = pending->finish(kTransportHandshakeSec);  // e.g. the shm segment handshake
  } catch (const std::exception& e) {
    LOG_WARN("%s", e.what());
    _exit(0);
  }
  pending.reset();
  if (cfg.tls && provider.capabilities().tls_wraps) {
    // The TLS handshake; or a peer link, routed to its session before TLS.
    conn = secure_client(std::move(conn), *cfg.tls,
                         [&](const proto::PeerTicketId& id, uint64_t request_id, int fd) {
                           return peer_handoff(control, id, proto::Nonce{}, request_id, fd, true);
                         });
    if (!conn) _exit(0);
  }
  const DaemonConfig& d = *cfg.daemon;
  SessionConfig sc{cfg.token, cfg.server_info};
  if (d.chunk_bytes) sc.staging_bytes = sc.payload_bytes = d.chunk_bytes;
  if (d.pipeline_depth) sc.staging_limit = d.pipeline_depth;
  sc.client_timeout_s = d.client_timeout_s;
  sc.drain_limit_s = d.drain_limit_s;
  const std::string identity = client_identity(*conn);
  HandshakeConfig hc{cfg.token,
                     cfg.server_info,
                     cfg.gpu_count,
                     cfg.driver_version,
                     cfg.use_cuda ? "cuda" : "host",
                     [&](const proto::HelloReq& h) {
                       // A peer link is no session: its ticket routes it to one
                       // (hand_off_peer_link).
                       return is_peer_link(h) ? std::string()
                                              : ask_daemon(control, identity, is_query(h));
                     },
                     payload_window(sc),
                     /*peer_links_prove_later=*/true};
  proto::HelloReq hello;
  try {
    if (!server_handshake(*conn, hc, &hello)) _exit(0);
    sc.client_timeout_ms = hello.timeout_ms;
    sc.client_known = hello.known;
  } catch (const std::exception& e) {
    LOG_WARN("handshake with %s failed: %s", conn->peer().c_str(), e.what());
    _exit(0);
  }
  if (is_peer_link(hello)) {
    try {
      hand_off_peer_link(*conn, control, cfg.tls && provider.capabilities().tls_wraps);
    } catch (const std::exception& e) {
      LOG_WARN("peer link from %s: %s", conn->peer().c_str(), e.what());
    }
    _exit(0);
  }
  std::unique_ptr<backend::GpuQuery> gpus =
      cfg.use_cuda
          ? backend::make_cuda_gpu_query(cfg.gpu_table ? *cfg.gpu_table : proto::NvmlProbeTable{},
                                         cfg.driver_version)
          : backend::make_host_gpu_query(cfg.ledgers);
  if (is_query(hello)) {  // NVML answers only: no executor, no context (server/nvml.h)
    serve_query_link(*conn, *gpus, hello.known, cfg.server_info, d.client_timeout_s);
    _exit(0);
  }
  sc.gpus = gpus.get();

  std::unique_ptr<backend::Executor> exec;
  std::string error;
  if (cfg.use_cuda)
    exec = backend::make_cuda_executor(error);
  else
    exec = backend::make_host_executor(cfg.ledgers, cfg.host_kernels);
  if (!exec) {
    LOG_ERROR("cannot start a session: %s", error.c_str());
    _exit(1);
  }
  {
    OutputCapture output;
    if (!output.start())
      LOG_WARN("cannot capture kernel output; device printf goes to rgpud's stdout");
    // Device assert messages go to stderr: capture it too, and keep the log on the original.
    OutputCapture errors;
    int log_fd = fcntl(STDERR_FILENO, F_DUPFD_CLOEXEC, 3);
    bool logging = log_fd >= 0 && log::set_output(log_fd);
    if (!logging && log_fd >= 0) close(log_fd);
    if (!logging || !errors.start(STDERR_FILENO)) {
      LOG_WARN("cannot capture kernels' stderr; device assert messages go to rgpud's stderr");
    } else {
      sc.errors = &errors;
    }
    sc.module_cache = cfg.cache;
    sc.output = &output;
    sc.authenticated = true;
    sc.mem_limit = d.client_mem_limit;
    sc.image_floor = d.max_image_mb << 20;
    sc.decompressions = cfg.decompressions;
    sc.decompressions_per_user = d.max_decompressions_per_user;
    if (cfg.users) {  // the daemon gave this session its user's entry before admitting it
      const int entry = cfg.users->find(getpid());
      sc.user_account = {cfg.users, entry, d.mem_limit_per_user};
      sc.user = cfg.users->user(entry);
    }
    sc.decompression_wait_ms = d.decompression_wait_ms;
    sc.max_streams = d.client_max_streams;
    sc.max_events = d.client_max_events;
    sc.control = control;  // CUDA IPC requests to rgpud (server/ipc_exports.h)
    sc.peer_tls = cfg.peer_tls;
    sc.peer_key = cfg.peer_key;
    sc.peer_key_error = cfg.peer_key_error;
    sc.peer_listen = cfg.peer_listen;
    Session session(*conn, *exec, sc);
    session.run();
  }
  exec.reset();
  _exit(0);
}

}  // namespace rgpu::server
