#include "server/daemon.h"

#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <memory>
#include <set>
#include <vector>

#include "backend/cuda/cuda_executor.h"
#include "backend/host/host_executor.h"
#include "common/log.h"
#include "proto/auth.h"
#include "server/session.h"
#include "transport/shm/shm.h"
#include "transport/tcp/tcp.h"

namespace rgpu::server {
namespace {

volatile sig_atomic_t g_stop = 0;
void on_stop(int) { g_stop = 1; }
void on_child(int) {}

// Probes the GPU in a throw-away child process: the daemon itself never initialises CUDA, because
// a CUDA context does not survive fork and every session is a fork of the daemon.
bool probe_cuda(std::string& why, int& gpus) {
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
    std::string msg = exec ? "ok " + std::to_string(exec->device_count()) : "no " + error;
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
    gpus = std::stoi(msg.substr(3));
    return true;
  }
  why = msg.size() > 3 ? msg.substr(3) : "the GPU probe crashed";
  return false;
}

std::string hostname() {
  char h[256] = {};
  gethostname(h, sizeof h - 1);
  return h;
}

}  // namespace

int run_daemon(const DaemonConfig& cfg) {
  std::optional<std::string> token;
  if (cfg.token_file) {
    std::string error;
    token = proto::read_token_file(*cfg.token_file, error);
    if (!token) {
      LOG_ERROR("%s", error.c_str());
      return 2;
    }
  }

  bool use_cuda = cfg.backend != BackendKind::Host;
  if (use_cuda) {
    std::string why;
    int gpus = 0;
    if (probe_cuda(why, gpus)) {
      LOG_NOTICE("cuda backend: %d GPU(s)", gpus);
    } else if (cfg.backend == BackendKind::Cuda) {
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
    for (int i = 0; i < cfg.host_gpus; ++i) {
      auto* l = backend::HostLedger::create(cfg.host_capacity);
      if (!l) {
        LOG_ERROR("cannot create the host backend's shared ledger");
        return 1;
      }
      ledgers.push_back(l);
    }
  }

  std::unique_ptr<transport::Listener> listener;
  try {
    listener = transport::tcp_listen(cfg.listen_host, cfg.listen_port);
  } catch (const std::exception& e) {
    LOG_ERROR("%s", e.what());
    return 1;
  }
  if (!listener->is_loopback() && !token) {
    LOG_ERROR(
        "refusing to listen on %s without authentication: give --token-file (clients set "
        "RGPU_TOKEN), or listen on loopback",
        listener->address().c_str());
    return 2;
  }
  // Clients on this machine may use shared memory (transport/shm) instead of TCP.
  std::unique_ptr<transport::Listener> shm;
  try {
    shm = transport::shm_listen(transport::shm_socket_name(listener->port()));
  } catch (const std::exception& e) {
    LOG_WARN("no shared-memory transport: %s", e.what());
  }
  if (!cfg.port_file.empty()) {
    std::string tmp = cfg.port_file + ".tmp";
    std::ofstream(tmp) << listener->port() << "\n";
    rename(tmp.c_str(), cfg.port_file.c_str());
  }
  LOG_NOTICE("listening on %s%s%s (backend %s%s)", listener->address().c_str(), shm ? " and " : "",
             shm ? shm->address().c_str() : "", use_cuda ? "cuda" : "host",
             token ? ", token required" : "");

  struct sigaction sa {};
  sa.sa_handler = on_stop;
  sigaction(SIGTERM, &sa, nullptr);
  sigaction(SIGINT, &sa, nullptr);
  sa.sa_handler = on_child;  // no SA_RESTART: accept() returns so children are reaped promptly
  sigaction(SIGCHLD, &sa, nullptr);
  signal(SIGPIPE, SIG_IGN);

  const pid_t daemon_pid = getpid();
  const std::string info = "rgpud " RGPU_VERSION " on " + hostname();
  std::set<pid_t> children;
  while (!g_stop) {
    std::unique_ptr<transport::Connection> conn;
    int shm_sock = -1;
    pollfd fds[2] = {{listener->fd(), POLLIN, 0}, {shm ? shm->fd() : -1, POLLIN, 0}};
    if (poll(fds, shm ? 2 : 1, -1) > 0) {
      try {
        if (fds[0].revents & POLLIN)
          conn = listener->accept();
        else if (shm && (fds[1].revents & POLLIN))
          shm_sock = transport::shm_accept(*shm);
      } catch (const std::exception& e) {
        LOG_ERROR("%s", e.what());
      }
    }
    for (pid_t p; (p = waitpid(-1, nullptr, WNOHANG)) > 0;) {
      children.erase(p);
      for (auto* l : ledgers) l->release_process(p);
    }
    if (!conn && shm_sock < 0) continue;
    pid_t pid = fork();
    if (pid < 0) {
      LOG_ERROR("fork failed: %s; dropping a client", strerror(errno));
      if (shm_sock >= 0) close(shm_sock);
      continue;
    }
    if (pid > 0) {
      children.insert(pid);
      if (shm_sock >= 0) close(shm_sock);
      LOG_INFO("client %s: session process %d", conn ? conn->peer().c_str() : "(shm)", pid);
      continue;
    }
    // Session process.
    prctl(PR_SET_PDEATHSIG, SIGTERM);
    if (getppid() != daemon_pid) _exit(0);
    listener.reset();
    shm.reset();
    signal(SIGCHLD, SIG_DFL);
    signal(SIGTERM, SIG_DFL);
    signal(SIGINT, SIG_DFL);
    std::string prefix = "rgpud[" + std::to_string(getpid()) + "]";
    log::init(prefix.c_str(), log::Level::Notice);
    if (shm_sock >= 0) {
      try {
        conn = transport::shm_adopt(shm_sock);  // the segment handshake, in the session process
      } catch (const std::exception& e) {
        LOG_WARN("%s", e.what());
        _exit(0);
      }
    }
    std::unique_ptr<backend::Executor> exec;
    std::string error;
    if (use_cuda)
      exec = backend::make_cuda_executor(error);
    else
      exec = backend::make_host_executor(ledgers, &host_kernels);
    if (!exec) {
      LOG_ERROR("cannot start a session: %s", error.c_str());
      _exit(1);
    }
    {
      OutputCapture output;
      if (!output.start())
        LOG_WARN("cannot capture kernel output; device printf goes to rgpud's stdout");
      SessionConfig sc{token, info};
      if (cfg.chunk_bytes) sc.staging_bytes = sc.payload_bytes = cfg.chunk_bytes;
      if (cfg.pipeline_depth) sc.staging_limit = cfg.pipeline_depth;
      sc.module_cache = &cache;
      sc.output = &output;
      Session session(*conn, *exec, sc);
      session.run();
    }
    exec.reset();
    _exit(0);
  }
  LOG_NOTICE("stopping; ending %zu session(s)", children.size());
  for (pid_t p : children) kill(p, SIGTERM);
  for (pid_t p : children) waitpid(p, nullptr, 0);
  return 0;
}

}  // namespace rgpu::server
