#include "server/daemon.h"

#include <dirent.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <memory>
#include <set>
#include <vector>

#include "backend/cuda/cuda_executor.h"
#include "backend/gpu_query.h"
#include "backend/host/host_executor.h"
#include "common/log.h"
#include "proto/auth.h"
#include "server/peer_vouch.h"
#include "server/session.h"
#include "server/session_process.h"
#include "server/supervisor.h"
#include "server/tls_gate.h"
#include "transport/registry.h"
#include "transport/tcp/net_emu.h"

namespace rgpu::server {
namespace {

// Probes the GPU in a throw-away child process: the daemon itself never initialises CUDA, because
// a CUDA context does not survive fork and every session is a fork of the daemon.
// It also learns each GPU's identity for NVML queries (backend::probe_cuda_gpus: no context),
// sent after the first line as an encoded NvmlProbeTable.
bool probe_cuda(std::string& why, int& gpus, int& driver, proto::NvmlProbeTable& table) {
  int fds[2];
  if (pipe(fds) != 0) {
    why = "pipe failed";
    return false;
  }
  pid_t pid = fork();
  if (pid == 0) {
    close(fds[0]);
    std::string error;
    auto exec = backend::make_cuda_executor(error);
    std::string msg = exec ? "ok " + std::to_string(exec->device_count()) + " " +
                                 std::to_string(exec->driver_version()) + "\n"
                           : "no " + error;
    proto::NvmlProbeTable t;
    std::string probe_error;
    if (exec && backend::probe_cuda_gpus(t, probe_error)) {
      auto bytes = proto::encode_message(t);
      msg += "T";  // then the encoded table
      msg.append(bytes.begin(), bytes.end());
    } else if (exec) {
      msg += "!" + probe_error;  // not an encoded table: the parent says why
    }
    ssize_t n = write(fds[1], msg.data(), msg.size());
    (void)n;
    _exit(0);
  }
  close(fds[1]);
  std::string msg;
  char buf[512];
  ssize_t n;
  while ((n = read(fds[0], buf, sizeof buf)) > 0) msg.append(buf, static_cast<size_t>(n));
  close(fds[0]);
  waitpid(pid, nullptr, 0);
  if (msg.rfind("ok ", 0) == 0) {
    if (sscanf(msg.c_str() + 3, "%d %d", &gpus, &driver) != 2) {
      why = "the GPU probe answered nonsense";
      return false;
    }
    const size_t nl = msg.find('\n');
    const std::string rest = nl == std::string::npos ? "" : msg.substr(nl + 1);
    try {
      if (!rest.empty() && rest[0] == 'T')
        table = proto::decode_message<proto::NvmlProbeTable>(
            reinterpret_cast<const uint8_t*>(rest.data()) + 1, rest.size() - 1);
    } catch (const std::exception&) {
      table = {};
    }
    if (static_cast<int>(table.gpus.size()) != gpus) {
      table = {};
      LOG_WARN(
          "NVML queries will not know the GPUs' identity: %s",
          rest.size() > 1 && rest[0] == '!' ? rest.c_str() + 1 : "the GPU probe's table is bad");
    }
    return true;
  }
  why = msg.rfind("no ", 0) == 0 ? msg.substr(3) : "the GPU probe crashed";
  return false;
}

// Reads pending signals; true when one asks the daemon to stop.
bool drain_signals(int sigfd) {
  bool stop = false;
  signalfd_siginfo si;
  while (read(sigfd, &si, sizeof si) == sizeof si) {
    if (si.ssi_signo == SIGTERM || si.ssi_signo == SIGINT) {
      LOG_NOTICE("%s received", si.ssi_signo == SIGTERM ? "SIGTERM" : "SIGINT");
      stop = true;
    }
  }
  return stop;
}

// Raises the soft descriptor limit to the hard one (session processes, forks of the daemon,
// inherit it) and returns the limit in force.
uint64_t raise_fd_limit() {
  rlimit r{};
  if (getrlimit(RLIMIT_NOFILE, &r) != 0) {
    LOG_WARN("getrlimit(RLIMIT_NOFILE): %s; assuming 1024 descriptors", strerror(errno));
    return 1024;
  }
  const auto was = static_cast<unsigned long long>(r.rlim_cur);
  if (r.rlim_cur < r.rlim_max) {
    rlimit want = r;
    want.rlim_cur = r.rlim_max;
    if (setrlimit(RLIMIT_NOFILE, &want) == 0)
      r = want;
    else
      LOG_WARN("cannot raise the descriptor limit from %llu to the hard limit %llu: %s", was,
               static_cast<unsigned long long>(r.rlim_max), strerror(errno));
  }
  const auto now = static_cast<unsigned long long>(r.rlim_cur);
  if (now != was)
    LOG_NOTICE("descriptor limit %llu (raised from %llu to the hard limit)", now, was);
  else
    LOG_NOTICE("descriptor limit %llu%s", now, r.rlim_cur == r.rlim_max ? " (the hard limit)" : "");
  return r.rlim_cur == RLIM_INFINITY ? UINT64_MAX : static_cast<uint64_t>(r.rlim_cur);
}

// Descriptors this process has open (from /proc; a guess without it).
size_t open_fds() {
  DIR* d = opendir("/proc/self/fd");
  if (!d) return 32;
  size_t n = 0;
  while (dirent* e = readdir(d))
    if (e->d_name[0] != '.') ++n;
  closedir(d);
  return n > 0 ? n - 1 : 0;  // less the directory's own
}

std::string hostname() {
  char h[256] = {};
  gethostname(h, sizeof h - 1);
  return h;
}

}  // namespace

bool valid_gpu_list(const std::string& list, std::string& why) {
  std::set<std::string> seen;
  size_t start = 0;
  while (true) {
    const size_t comma = list.find(',', start);
    const std::string item =
        list.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
    const bool number = !item.empty() && item.size() <= 3 &&
                        std::all_of(item.begin(), item.end(), [](char c) { return isdigit(c); });
    const bool uuid = item.rfind("GPU-", 0) == 0 || item.rfind("MIG-", 0) == 0;
    if (!number && !uuid) {
      why = "'" + item + "' is neither a GPU number nor a GPU-/MIG- UUID";
      return false;
    }
    if (!seen.insert(number ? std::to_string(std::stoi(item)) : item).second) {
      why = "'" + item + "' is named twice";
      return false;
    }
    if (comma == std::string::npos) return true;
    start = comma + 1;
  }
}

int run_daemon(const DaemonConfig& cfg) {
  const uint64_t fd_limit = raise_fd_limit();
  std::optional<std::string> token;
  if (cfg.token_file) {
    std::string error;
    token = proto::read_token_file(*cfg.token_file, error);
    if (!token) {
      LOG_ERROR("%s", error.c_str());
      return 2;
    }
  }
  // The peer key: an explicit file must be good; the default one is made when missing, and
  // without it this rgpud copies to and from no other (every such copy says why).
  std::optional<proto::PeerKey> peer_key;
  std::string peer_key_error;
  {
    const std::string path = cfg.peer_key_file ? *cfg.peer_key_file : default_peer_key_file();
    std::string error;
    auto secret = load_peer_key(path, !cfg.peer_key_file, error);
    if (!secret && cfg.peer_key_file) {
      LOG_ERROR("%s", error.c_str());
      return 2;
    }
    if (!secret) {
      peer_key_error = error + "; give rgpud --peer-key-file";
      LOG_WARN("no peer key (%s): copies between this rgpud and others are refused",
               peer_key_error.c_str());
    } else {
      if (token && *secret == *token)
        LOG_WARN(
            "the peer key file holds the clients' token: a client could then vouch for peer "
            "endpoints itself; give rgpuds a secret of their own (--peer-key-file)");
      peer_key = proto::derive_peer_key(*secret);
    }
  }
  std::unique_ptr<transport::TlsContext> tls, peer_tls;
  try {
    tls = make_tls_context(cfg.tls);
    peer_tls = make_peer_tls_context(cfg.tls);
  } catch (const std::exception& e) {
    LOG_ERROR("%s", e.what());
    return 2;
  }

  // Listening beyond this machine needs authentication: checked before anything is bound
  // or probed, so a refused configuration never accepts a connection.
  auto unauthenticated = [&](bool local) { return !local && !token && !(tls && tls->mutual()); };
  auto need_auth = [](const std::string& where) {
    return "refusing to listen on " + where +
           " without authentication: give --token-file (clients set RGPU_TOKEN) or "
           "--tls-client-ca (mutual TLS), or listen on loopback";
  };
  try {
    if (unauthenticated(
            transport::Registry::builtin().listens_locally({cfg.listen_host, cfg.listen_port}))) {
      LOG_ERROR("%s", need_auth(cfg.listen_host + ":" + std::to_string(cfg.listen_port)).c_str());
      return 2;
    }
  } catch (const std::exception& e) {
    LOG_ERROR("%s", e.what());
    return 1;
  }

  bool use_cuda = cfg.backend != BackendKind::Host;
  int gpus = 0, driver = 0;
  proto::NvmlProbeTable gpu_table;  // the cuda backend's GPUs, for NVML queries (server/nvml.h)
  if (!cfg.gpus.empty()) {
    if (!use_cuda) {
      LOG_ERROR("--gpus selects GPUs of the cuda backend; the host backend has --host-gpus");
      return 2;
    }
    // Sessions are forks of the daemon and inherit these; numbering follows nvidia-smi's (PCI).
    setenv("CUDA_DEVICE_ORDER", "PCI_BUS_ID", 1);
    setenv("CUDA_VISIBLE_DEVICES", cfg.gpus.c_str(), 1);
  }
  if (use_cuda) {
    std::string why;
    if (probe_cuda(why, gpus, driver, gpu_table)) {
      const int wanted = static_cast<int>(std::count(cfg.gpus.begin(), cfg.gpus.end(), ',')) + 1;
      if (!cfg.gpus.empty() && gpus != wanted) {
        LOG_ERROR("--gpus %s: only %d of the %d GPUs named are GPUs of this machine",
                  cfg.gpus.c_str(), gpus, wanted);
        return 1;
      }
      LOG_NOTICE("cuda backend: %d GPU(s)%s%s", gpus, cfg.gpus.empty() ? "" : " (--gpus ",
                 cfg.gpus.empty() ? "" : (cfg.gpus + ")").c_str());
    } else if (cfg.backend == BackendKind::Cuda || !cfg.gpus.empty()) {
      LOG_ERROR("cannot use the cuda backend: %s", why.c_str());
      return 1;
    } else {
      LOG_WARN("no GPU: %s; using the host backend (a test double: host memory, no kernels)",
               why.c_str());
      use_cuda = false;
    }
  }
  std::vector<backend::HostLedger*> ledgers;
  backend::HostKernels host_kernels;
  if (!use_cuda && !cfg.host_kernels.empty()) {
    std::string error;
    if (!backend::load_host_kernels(cfg.host_kernels, host_kernels, error)) {
      LOG_ERROR("%s", error.c_str());
      return 2;
    }
    LOG_NOTICE("host backend: %zu kernel(s) from %s", host_kernels.size(),
               cfg.host_kernels.c_str());
  }
  ModuleCache cache(cfg.module_cache == "none" ? ""
                    : cfg.module_cache.empty() ? default_module_cache_dir()
                                               : cfg.module_cache,
                    cfg.module_cache_max_mb << 20);
  if (!use_cuda) {
    gpus = cfg.host_gpus;
    driver = 13000;  // what the host executor reports
    for (int i = 0; i < cfg.host_gpus; ++i) {
      auto* l = backend::HostLedger::create(cfg.host_capacity);
      if (!l) {
        LOG_ERROR("cannot create the host backend's shared ledger");
        return 1;
      }
      ledgers.push_back(l);
    }
  }

  // One listener per transport compiled in (transport/registry.h): the network one first, whose
  // port the co-located ones (the shm socket @rgpud-<port>) are named after.
  std::vector<transport::OpenListener> listeners;
  try {
    std::vector<std::string> warnings;
    listeners = transport::Registry::builtin().listen({cfg.listen_host, cfg.listen_port}, warnings);
    for (const auto& w : warnings) LOG_WARN("%s", w.c_str());
  } catch (const std::exception& e) {
    LOG_ERROR("%s", e.what());
    return 1;
  }
  const transport::ProviderListener* listener = listeners.front().listener.get();
  if (unauthenticated(listener->is_loopback())) {  // the name resolved otherwise when bound
    LOG_ERROR("%s", need_auth(listener->address()).c_str());
    return 2;
  }
  if (!cfg.port_file.empty()) {
    std::string tmp = cfg.port_file + ".tmp";
    std::ofstream(tmp) << listener->port() << "\n";
    rename(tmp.c_str(), cfg.port_file.c_str());
  }
  std::string addresses;
  for (size_t i = 0; i < listeners.size(); ++i)
    addresses += (i == 0 ? "" : " and ") + listeners[i].listener->address();
  LOG_NOTICE("listening on %s (backend %s%s)", addresses.c_str(), use_cuda ? "cuda" : "host",
             token ? ", token required" : "");

  if (tls)
    LOG_NOTICE("TCP clients must use TLS 1.3%s", tls->mutual() ? " with a client certificate" : "");

  // Signals arrive through a signalfd read by the same poll as the sockets: no handler, so no race
  // between a SIGCHLD and going to sleep.  Session processes restore the mask after the fork.
  sigset_t mask, old_mask;
  sigemptyset(&mask);
  sigaddset(&mask, SIGCHLD);
  sigaddset(&mask, SIGTERM);
  sigaddset(&mask, SIGINT);
  sigprocmask(SIG_BLOCK, &mask, &old_mask);
  int sigfd = signalfd(-1, &mask, SFD_CLOEXEC | SFD_NONBLOCK);
  if (sigfd < 0) {
    LOG_ERROR("signalfd: %s", strerror(errno));
    return 1;
  }
  signal(SIGPIPE, SIG_IGN);

  // One table of decompression slots for every session (--max-decompressions), shared like the
  // host ledger: made before the first fork.
  DecompressionSlots* decompressions = DecompressionSlots::create(cfg.max_decompressions);
  if (!decompressions) {
    LOG_ERROR("cannot create the shared table of decompression slots");
    return 1;
  }

  // What each user's sessions hold together (--mem-limit-per-user), shared the same way.
  UserAccounts* users = UserAccounts::create();
  if (!users) {
    LOG_ERROR("cannot create the shared table of per-user accounts");
    return 1;
  }

  SessionProcessConfig spc;
  spc.daemon = &cfg;
  spc.decompressions = decompressions;
  spc.users = users;
  spc.token = token;
  // The tag announces RGPU_NET_EMU to clients (rgpu bench --emu checks it).
  spc.server_info = "rgpud " RGPU_VERSION " on " + hostname() + transport::net_emu_tag();
  if (transport::process_net_emu().on())
    LOG_NOTICE(
        "network emulation (RGPU_NET_EMU): %s on TCP, this side's direction, toward clients "
        "that emulate theirs (not over shm or TLS)",
        transport::process_net_emu().spec().c_str());
  spc.use_cuda = use_cuda;
  spc.gpu_count = gpus;
  spc.driver_version = driver;
  spc.ledgers = ledgers;
  spc.host_kernels = &host_kernels;
  spc.cache = &cache;
  spc.tls = tls.get();
  spc.peer_tls = peer_tls.get();
  spc.gpu_table = &gpu_table;
  spc.peer_key = peer_key;
  spc.peer_key_error = peer_key_error;
  spc.peer_listen = listener->address();
  Supervisor sup(cfg, ledgers);
  sup.set_decompressions(decompressions);
  sup.set_user_accounts(users);
  int max_sessions = cfg.max_sessions;
  if (!use_cuda && max_sessions > backend::HostLedger::kSlots) {
    LOG_WARN("--max-sessions %d: the host backend's ledger has %d slots; using %d", max_sessions,
             backend::HostLedger::kSlots, backend::HostLedger::kSlots);
    max_sessions = backend::HostLedger::kSlots;
  }
  sup.set_max_sessions(max_sessions);
  // What IPC exports may keep open, so that accepting a client always finds descriptors.
  const size_t ipc_budget = sup.set_fd_limit(fd_limit, open_fds());
  if (cfg.client_max_ipc_exports == 0 || ipc_budget < cfg.client_max_ipc_exports)
    LOG_NOTICE("CUDA IPC exports of all sessions together: at most %zu (%s)", ipc_budget,
               sup.ipc_exports().limits().total_why.c_str());

  const pid_t daemon_pid = getpid();
  // Phase 2 of accepting, for a connection the budget admits: a session process of its own.  In
  // the child it never returns.
  auto start_session = [&](std::unique_ptr<transport::PendingConnection> pending,
                           const transport::Provider& provider) {
    const std::string who = pending->peer(), source = pending->source();
    const bool local = provider.capabilities().co_located_only;
    if (std::string why = sup.make_handshake_room(source, local); !why.empty()) {
      sup.note_dropped(who, why);  // dropped at once: closing the socket is all it costs
      return;
    }
    int ctl[2];
    if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, ctl) != 0) {
      LOG_ERROR("socketpair: %s; dropping client %s", strerror(errno), who.c_str());
      return;
    }
    pid_t pid = fork();
    if (pid < 0) {
      LOG_ERROR("fork failed: %s; dropping client %s", strerror(errno), who.c_str());
      close(ctl[0]);
      close(ctl[1]);
      return;
    }
    if (pid > 0) {
      close(ctl[1]);
      pending.reset();  // the session process has its own copy of the connection
      sup.add(pid, ctl[0], who, source, local);
      LOG_INFO("client %s: session process %d", who.c_str(), pid);
      return;
    }
    // Session process.
    prctl(PR_SET_PDEATHSIG, SIGTERM);
    if (getppid() != daemon_pid) _exit(0);
    close(ctl[0]);
    close(sigfd);
    sup.close_all_in_child();
    listeners.clear();
    signal(SIGCHLD, SIG_DFL);
    signal(SIGTERM, SIG_DFL);
    signal(SIGINT, SIG_DFL);
    sigprocmask(SIG_SETMASK, &old_mask, nullptr);
    std::string prefix = "rgpud[" + std::to_string(getpid()) + "]";
    log::init(prefix.c_str(), log::Level::Notice);
    run_session_process(spc, std::move(pending), provider, ctl[1]);
  };
  bool stop = false;
  while (!stop) {
    std::vector<pollfd> fds = {{sigfd, POLLIN, 0}};
    for (const auto& l : listeners) fds.push_back({l.listener->fd(), POLLIN, 0});
    const size_t first_child = fds.size();
    sup.add_control_fds(fds);
    int n = poll(fds.data(), fds.size(), sup.next_deadline_ms());
    if (n < 0 && errno != EINTR) {
      LOG_ERROR("poll: %s", strerror(errno));
      break;
    }
    if (n > 0 && (fds[0].revents & POLLIN)) stop = drain_signals(sigfd);
    if (n > 0) sup.serve_controls(fds, first_child);
    sup.reap();
    sup.enforce_deadlines();
    if (stop || n <= 0) continue;
    // Phase 1 of accepting: take raw connections without waiting for the clients, up to a burst
    // per listener and wake-up, so that a flood of connections that are dropped at once drains
    // the backlog faster than it fills (a full backlog makes the kernel drop a client's SYN, and
    // the client retries only after a second or more).
    constexpr int kAcceptBurst = 256;
    for (size_t i = 0; i < listeners.size(); ++i) {
      if (!(fds[1 + i].revents & POLLIN)) continue;
      for (int k = 0; k < kAcceptBurst; ++k) {
        pollfd ready{listeners[i].listener->fd(), POLLIN, 0};
        if (k > 0 && poll(&ready, 1, 0) <= 0) break;
        std::unique_ptr<transport::PendingConnection> pending;
        try {
          pending = listeners[i].listener->accept();
        } catch (const std::exception& e) {
          LOG_ERROR("%s", e.what());
          break;
        }
        if (pending) start_session(std::move(pending), *listeners[i].provider);
      }
    }
  }
  listeners.clear();
  int rc = sup.shut_down(sigfd, cfg.shutdown_timeout_ms);
  close(sigfd);
  return rc;
}

}  // namespace rgpu::server
