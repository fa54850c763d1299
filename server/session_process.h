// The life of one session process (a fork of rgpud per connection): the shm segment handshake and
// the rgpu handshake first, with nothing spent on the client yet; then admission by the daemon
// (its session limits, over a control socket); only then the executor (GPU contexts, the host
// ledger slot) and the Session.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "backend/host/host_executor.h"
#include "proto/messages_nvml.h"
#include "proto/peer_auth.h"
#include "server/daemon.h"
#include "server/decompressions.h"
#include "server/module_cache.h"
#include "server/user_accounts.h"
#include "transport/provider.h"
#include "transport/tls/tls.h"

namespace rgpu::server {

struct SessionProcessConfig {
  const DaemonConfig* daemon = nullptr;
  std::optional<std::string> token;
  std::string server_info;
  bool use_cuda = false;
  int gpu_count = 0;
  int driver_version = 0;
  std::vector<backend::HostLedger*> ledgers;  // host backend
  const backend::HostKernels* host_kernels = nullptr;
  const ModuleCache* cache = nullptr;
  DecompressionSlots* decompressions = nullptr;  // shared by every session (--max-decompressions)
  UserAccounts* users = nullptr;  // what each user's sessions hold (--mem-limit-per-user)
  const transport::TlsContext* tls = nullptr;        // TCP clients must use TLS
  const transport::TlsContext* peer_tls = nullptr;   // the same certificate for peer links
  const proto::NvmlProbeTable* gpu_table = nullptr;  // cuda backend: what the GPU probe learnt
  // Copies between servers (server/peer_vouch.h): the peer key (none: `peer_key_error` says
  // why) and the TCP listener's address.
  std::optional<proto::PeerKey> peer_key;
  std::string peer_key_error;
  std::string peer_listen;
};

// Admission messages on the control socket (SOCK_SEQPACKET): the session sends
// kAdmitRequest + its identity once the client authenticated; the daemon answers kAdmitYes, or
// kAdmitNo + the reason.
constexpr char kAdmitRequest = 'A';
// The same for a query link (HelloReq::purpose Queries, server/nvml.h): it holds no GPU resource,
// so it is counted apart from sessions (--max-sessions of them at most, too).
constexpr char kAdmitQuery = 'Q';
constexpr char kAdmitYes = 'Y';
constexpr char kAdmitNo = 'N';

// Runs in the forked child; never returns.  `pending` is what the daemon accepted through
// `provider` (phase 1); phase 2 of accepting (the transport's handshake, then TLS where the
// provider's connections take it and rgpud has a certificate) runs here.
[[noreturn]] void run_session_process(const SessionProcessConfig& cfg,
                                      std::unique_ptr<transport::PendingConnection> pending,
                                      const transport::Provider& provider, int control);

}  // namespace rgpu::server
