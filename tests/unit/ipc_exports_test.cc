// CUDA IPC's daemon side: exports kept per session, imports by token, refusal of another daemon's
// tokens, and exports ending with their session (server/ipc_exports.h, server/supervisor.h).
#include "server/ipc_exports.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <poll.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <cstring>
#include <thread>
#include <vector>

#include "server/session_process.h"
#include "server/supervisor.h"

namespace rgpu::server {
namespace {

struct Pair {
  int daemon = -1, session = -1;
  Pair() {
    int s[2];
    EXPECT_EQ(socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, s), 0);
    daemon = s[0];
    session = s[1];
  }
  ~Pair() {
    if (daemon >= 0) close(daemon);
    if (session >= 0) close(session);
  }
};

// Runs the daemon's loop for `pairs` until stopped: every request is answered by `ex`.
class FakeDaemon {
 public:
  FakeDaemon(IpcExports& ex, std::vector<std::pair<pid_t, int>> socks)
      : thread_([this, &ex, socks] {
          while (!stop_) {
            std::vector<pollfd> fds;
            for (auto& [pid, s] : socks) fds.push_back({s, POLLIN, 0});
            if (poll(fds.data(), fds.size(), 20) <= 0) continue;
            for (size_t i = 0; i < fds.size(); ++i) {
              if (!(fds[i].revents & POLLIN)) continue;
              char buf[1024];
              int fd = -1;
              ssize_t n = recv_control(fds[i].fd, buf, sizeof buf, fd, MSG_DONTWAIT);
              if (n > 0) ex.serve(socks[i].first, fds[i].fd, buf, static_cast<size_t>(n), fd);
            }
          }
        }) {}
  ~FakeDaemon() {
    stop_ = true;
    thread_.join();
  }

 private:
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

int memfd_with(const char* text, size_t size) {
  int fd = memfd_create("ipc-test", MFD_CLOEXEC);
  EXPECT_GE(fd, 0);
  EXPECT_EQ(ftruncate(fd, static_cast<off_t>(size)), 0);
  EXPECT_EQ(pwrite(fd, text, strlen(text), 4096), static_cast<ssize_t>(strlen(text)));
  return fd;
}

TEST(IpcExports, ImportSharesTheExportersMemory) {
  IpcExports ex;
  Pair a, b;
  FakeDaemon d(ex, {{100, a.daemon}, {200, b.daemon}});
  int mem = memfd_with("from A", 8192);
  IpcToken token{};
  ASSERT_EQ(ipc_export(a.session, mem, {4096, 4096, 1, 7}, token), "");
  EXPECT_EQ(memcmp(token.data(), ex.identity().data(), 16), 0);
  EXPECT_EQ(ex.size(), 1u);

  IpcMeta meta;
  int fd = -1;
  ASSERT_EQ(ipc_import(b.session, token, meta, fd), "");
  ASSERT_GE(fd, 0);
  EXPECT_EQ(meta.offset, 4096u);
  EXPECT_EQ(meta.size, 4096u);
  EXPECT_EQ(meta.device, 1);
  EXPECT_EQ(meta.kind, 7u);
  auto* p = static_cast<char*>(
      mmap(nullptr, meta.size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, meta.offset));
  ASSERT_NE(p, MAP_FAILED);
  EXPECT_STREQ(p, "from A");
  strcpy(p, "from B");  // the exporter sees the importer's writes
  char back[8] = {};
  EXPECT_EQ(pread(mem, back, 7, 4096), 7);
  EXPECT_STREQ(back, "from B");
  munmap(p, meta.size);
  close(fd);
  close(mem);
}

TEST(IpcExports, AnotherDaemonsTokenIsRefusedByName) {
  IpcExports ex, other;
  Pair a, b;
  FakeDaemon d1(ex, {{100, a.daemon}});
  FakeDaemon d2(other, {{300, b.daemon}});
  int mem = memfd_with("x", 4096);
  IpcToken token{};
  ASSERT_EQ(ipc_export(a.session, mem, {0, 4096, 0, 0}, token), "");
  close(mem);
  IpcMeta meta;
  int fd = -1;
  std::string why = ipc_import(b.session, token, meta, fd);
  EXPECT_NE(why.find("another rgpud"), std::string::npos) << why;
  EXPECT_EQ(fd, -1);
}

TEST(IpcExports, ExportsEndWithTheirSession) {
  IpcExports ex;
  Pair a, b;
  FakeDaemon d(ex, {{100, a.daemon}, {200, b.daemon}});
  int mem = memfd_with("x", 4096);
  IpcToken t1{}, t2{};
  ASSERT_EQ(ipc_export(a.session, mem, {0, 4096, 0, 0}, t1), "");
  ASSERT_EQ(ipc_export(b.session, mem, {0, 4096, 0, 0}, t2), "");
  close(mem);
  EXPECT_NE(t1, t2);
  // Only the exporter may revoke its export.
  EXPECT_NE(ipc_revoke(b.session, t1), "");
  ex.drop_owner(100);  // what the daemon does when session 100 ends
  EXPECT_EQ(ex.size(), 1u);
  IpcMeta meta;
  int fd = -1;
  std::string why = ipc_import(b.session, t1, meta, fd);
  EXPECT_NE(why.find("does not exist"), std::string::npos) << why;
  EXPECT_EQ(ipc_revoke(b.session, t2), "");
  EXPECT_EQ(ex.size(), 0u);
  why = ipc_import(b.session, t2, meta, fd);
  EXPECT_NE(why.find("does not exist"), std::string::npos) << why;
}

TEST(IpcExports, MalformedRequestsAreRefused) {
  IpcExports ex;
  Pair a;
  FakeDaemon d(ex, {{100, a.daemon}});
  IpcToken token{};
  // No descriptor attached.
  EXPECT_NE(ipc_export(a.session, -1, {0, 4096, 0, 0}, token).find("without"), std::string::npos);
  int mem = memfd_with("x", 4096);
  EXPECT_NE(ipc_export(a.session, mem, {UINT64_MAX, 2, 0, 0}, token).find("overflowing"),
            std::string::npos);
  close(mem);
  EXPECT_EQ(ex.size(), 0u);
}

TEST(IpcExports, SilentDaemonIsAnErrorNotAHang) {
  Pair a;  // nobody answers
  int mem = memfd_with("x", 4096);
  IpcToken token{};
  auto start = std::chrono::steady_clock::now();
  std::string why = ipc_export(a.session, mem, {0, 4096, 0, 0}, token, 200);
  EXPECT_NE(why.find("did not answer"), std::string::npos) << why;
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(5));
  close(mem);
}

// Through the Supervisor: only admitted sessions may export, and a session closing its control
// socket (it is ending) takes its exports with it.
TEST(IpcExports, SupervisorServesAdmittedSessionsAndDropsTheirExports) {
  DaemonConfig cfg;
  Supervisor sup(cfg, {});
  Pair a;
  sup.add(4242, a.daemon, "test peer", "uid 0", true);
  a.daemon = -1;  // the supervisor owns it now
  auto serve_once = [&] {
    std::vector<pollfd> fds;
    sup.add_control_fds(fds);
    ASSERT_EQ(poll(fds.data(), fds.size(), 2000), 1);
    sup.serve_controls(fds, 0);
  };
  std::string admit = std::string(1, kAdmitRequest) + "someone";
  ASSERT_EQ(send(a.session, admit.data(), admit.size(), 0), static_cast<ssize_t>(admit.size()));
  serve_once();
  char c = 0;
  ASSERT_EQ(recv(a.session, &c, 1, 0), 1);
  ASSERT_EQ(c, kAdmitYes);

  int mem = memfd_with("x", 4096);
  IpcToken token{};
  std::string why = "not run";
  std::thread t([&] { why = ipc_export(a.session, mem, {0, 4096, 0, 0}, token); });
  serve_once();
  t.join();
  close(mem);
  EXPECT_EQ(why, "");
  EXPECT_EQ(sup.ipc_exports().size(), 1u);

  close(a.session);  // the session ends
  a.session = -1;
  serve_once();
  EXPECT_EQ(sup.ipc_exports().size(), 0u);
}

// Every export keeps a descriptor open in the daemon: a session may keep at most
// --client-max-ipc-exports of them, and the refusal names the option (issue 36).
TEST(IpcExports, ASessionsExportsAreCapped) {
  IpcExports ex;
  IpcLimits l;
  l.per_session = 3;
  ex.set_limits(l);
  Pair a, b;
  FakeDaemon d(ex, {{100, a.daemon}, {200, b.daemon}});
  int mem = memfd_with("x", 4096);
  std::vector<IpcToken> mine(3);
  for (auto& t : mine) ASSERT_EQ(ipc_export(a.session, mem, {0, 4096, 0, 0}, t), "");
  IpcToken more{};
  std::string why = ipc_export(a.session, mem, {0, 4096, 0, 0}, more);
  EXPECT_NE(why.find("--client-max-ipc-exports 3"), std::string::npos) << why;
  EXPECT_EQ(ex.size_of(100), 3u);
  // Another session has its own allowance.
  ASSERT_EQ(ipc_export(b.session, mem, {0, 4096, 0, 0}, more), "");
  // A withdrawn export makes room again; so does the session's end.
  ASSERT_EQ(ipc_revoke(a.session, mine[0]), "");
  EXPECT_EQ(ipc_export(a.session, mem, {0, 4096, 0, 0}, mine[0]), "");
  EXPECT_NE(ipc_export(a.session, mem, {0, 4096, 0, 0}, more), "");
  ex.drop_owner(100);
  EXPECT_EQ(ex.size_of(100), 0u);
  EXPECT_EQ(ex.size(), 1u);
  EXPECT_EQ(ipc_export(a.session, mem, {0, 4096, 0, 0}, more), "");
  close(mem);
}

// All sessions' exports together stay within the daemon's descriptor budget: its limit less
// what it keeps for the sessions, NVML links and handshakes its limits allow (issue 36).
TEST(IpcExports, TheDaemonKeepsDescriptorsForNewClients) {
  DaemonConfig cfg;
  cfg.max_handshakes = 4;
  cfg.client_max_ipc_exports = 0;  // no per-session cap: the budget alone
  Supervisor sup(cfg, {});
  sup.set_max_sessions(10);
  // 200 - (20 open + 3 x 10 + 4 + the slack)
  const size_t budget = sup.set_fd_limit(200, 20);
  EXPECT_EQ(budget, 200u - (20 + 30 + 4 + Supervisor::kFdSlack));
  EXPECT_EQ(sup.set_fd_limit(100, 20), 0u);  // nothing left: no export fits
  EXPECT_EQ(sup.set_fd_limit(200, 20), budget);
  EXPECT_NE(sup.ipc_exports().limits().total_why.find("--max-sessions"), std::string::npos);

  // The same rule in IpcExports itself: the export past the budget is refused by name.
  IpcExports ex;
  IpcLimits l;
  l.total = 5;
  l.total_why = "a test's budget";
  ex.set_limits(l);
  Pair a, b;
  FakeDaemon d(ex, {{100, a.daemon}, {200, b.daemon}});
  int mem = memfd_with("x", 4096);
  IpcToken t{};
  for (int i = 0; i < 4; ++i) ASSERT_EQ(ipc_export(a.session, mem, {0, 4096, 0, 0}, t), "");
  ASSERT_EQ(ipc_export(b.session, mem, {0, 4096, 0, 0}, t), "");
  std::string why = ipc_export(b.session, mem, {0, 4096, 0, 0}, t);
  EXPECT_NE(why.find("descriptor limit"), std::string::npos) << why;
  EXPECT_NE(why.find("a test's budget"), std::string::npos) << why;
  EXPECT_EQ(ex.size(), 5u);
  close(mem);
}

// The range an export names lies inside the memory it names (IpcMeta::span).
TEST(IpcExports, AnExportNamesPartOfItsSpan) {
  IpcExports ex;
  Pair a, b;
  FakeDaemon d(ex, {{100, a.daemon}, {200, b.daemon}});
  int mem = memfd_with("x", 8192);
  IpcToken t{};
  IpcMeta bad{4096, 4096, 0, 0, 6000};
  EXPECT_NE(ipc_export(a.session, mem, bad, t).find("beyond"), std::string::npos);
  ASSERT_EQ(ipc_export(a.session, mem, {256, 512, 0, 0, 8192}, t), "");
  IpcMeta meta;
  int fd = -1;
  ASSERT_EQ(ipc_import(b.session, t, meta, fd), "");
  EXPECT_EQ(meta.offset, 256u);
  EXPECT_EQ(meta.size, 512u);
  EXPECT_EQ(meta.span, 8192u);
  close(fd);
  ASSERT_EQ(ipc_export(a.session, mem, {4096, 4096, 0, 0}, t), "");  // span 0: offset + size
  ASSERT_EQ(ipc_import(b.session, t, meta, fd), "");
  EXPECT_EQ(meta.span, 8192u);
  close(fd);
  close(mem);
}

// A freshly forked session process closes the descriptors the daemon keeps for exports
// (Supervisor::close_all_in_child): none of them leaks into another tenant's session.
TEST(IpcExports, AForkedSessionHoldsNoneOfTheDaemonsExports) {
  auto open_fds = [] {
    size_t n = 0;
    for (int fd = 0; fd < 4096; ++fd)
      if (fcntl(fd, F_GETFD) >= 0) ++n;
    return n;
  };
  DaemonConfig cfg;
  Supervisor sup(cfg, {});
  Pair a;
  sup.add(4243, a.daemon, "test peer", "uid 0", true);
  a.daemon = -1;
  auto serve_once = [&] {
    std::vector<pollfd> fds;
    sup.add_control_fds(fds);
    ASSERT_EQ(poll(fds.data(), fds.size(), 2000), 1);
    sup.serve_controls(fds, 0);
  };
  std::string admit = std::string(1, kAdmitRequest) + "someone";
  ASSERT_EQ(send(a.session, admit.data(), admit.size(), 0), static_cast<ssize_t>(admit.size()));
  serve_once();
  char c = 0;
  ASSERT_EQ(recv(a.session, &c, 1, 0), 1);
  int mem = memfd_with("x", 4096);
  const size_t before = open_fds();
  for (int i = 0; i < 8; ++i) {
    IpcToken token{};
    std::string why = "not run";
    std::thread t([&] { why = ipc_export(a.session, mem, {0, 4096, 0, 0}, token); });
    serve_once();
    t.join();
    ASSERT_EQ(why, "");
  }
  EXPECT_EQ(open_fds(), before + 8);  // kept by the "daemon"
  sup.close_all_in_child();           // what a new session process does first
  EXPECT_EQ(sup.ipc_exports().size(), 0u);
  EXPECT_EQ(open_fds(), before - 1);  // the exports and the session's control socket
  close(mem);
}

}  // namespace
}  // namespace rgpu::server
