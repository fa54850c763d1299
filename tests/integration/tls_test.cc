// TLS on TCP links: certificates made at test time with the openssl command into a temporary
// directory; rgpud --backend host with --tls-cert/--tls-key[/--tls-client-ca]; CUDA programs over
// TLS, and every way a TLS link must be refused, with the message the user sees.
#include <gtest/gtest.h>
#include <poll.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cstring>
#include <deque>
#include <fstream>
#include <iterator>
#include <mutex>
#include <regex>
#include <sstream>
#include <thread>

#include "tests/integration/harness.h"
#include "transport/tcp/tcp.h"

using namespace rgpu;
using namespace rgpu::test;

namespace {

bool has(const std::string& hay, const std::string& needle) {
  return hay.find(needle) != std::string::npos;
}

// The openssl command (Debian package openssl), found on PATH.
std::string openssl_cli() {
  const char* path = getenv("PATH");
  std::string dirs = path ? path : "/usr/bin:/bin";
  for (size_t b = 0, e; b <= dirs.size(); b = e + 1) {
    e = dirs.find(':', b);
    if (e == std::string::npos) e = dirs.size();
    std::string c = dirs.substr(b, e - b) + "/openssl";
    if (access(c.c_str(), X_OK) == 0) return c;
  }
  return "openssl (not found on PATH: apt-get install openssl)";
}

std::vector<std::string> plus(std::vector<std::string> a, const std::vector<std::string>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

void expect_pass(const Result& r, const std::string& name) {
  EXPECT_EQ(r.status, 0) << name << "\nstdout:\n" << r.out << "\nstderr:\n" << r.err;
  EXPECT_TRUE(has(r.out, name + ": passed")) << r.out << r.err;
}

class Tls : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    char tmpl[] = "/tmp/rgpu-tls-XXXXXX";
    dir_ = mkdtemp(tmpl);
    // name, extra arguments: two CAs, a server certificate for 127.0.0.1 only (an IP SAN), a
    // client certificate from the right CA and one from another CA.
    const std::vector<std::pair<std::string, std::vector<std::string>>> certs = {
        {"ca", {}},
        {"other-ca", {}},
        {"server",
         {"-addext", "subjectAltName=IP:127.0.0.1", "-CA", f("ca.crt"), "-CAkey", f("ca.key")}},
        {"client", {"-CA", f("ca.crt"), "-CAkey", f("ca.key")}},
        {"rogue", {"-CA", f("other-ca.crt"), "-CAkey", f("other-ca.key")}}};
    for (auto& [name, extra] : certs) {
      std::vector<std::string> argv = {openssl_cli(),
                                       "req",
                                       "-x509",
                                       "-newkey",
                                       "ec",
                                       "-pkeyopt",
                                       "ec_paramgen_curve:P-256",
                                       "-nodes",
                                       "-days",
                                       "2",
                                       "-subj",
                                       "/CN=rgpu-test-" + name,
                                       "-keyout",
                                       f(name + ".key"),
                                       "-out",
                                       f(name + ".crt")};
      argv.insert(argv.end(), extra.begin(), extra.end());
      Result r = run(argv, {}, 30);
      ASSERT_EQ(r.status, 0) << "openssl req for " << name << ": " << r.err;
    }
  }
  static void TearDownTestSuite() {
    std::string rm = "rm -rf '" + dir_ + "'";
    if (system(rm.c_str()) != 0) perror("rm");
  }
  static std::string f(const std::string& name) { return dir_ + "/" + name; }
  static std::vector<std::string> server_args(bool mutual = false) {
    std::vector<std::string> a = {"--tls-cert", f("server.crt"), "--tls-key", f("server.key")};
    if (mutual) a.insert(a.end(), {"--tls-client-ca", f("ca.crt")});
    return a;
  }
  static Env tls_env(const Daemon& d) {
    Env env = d.client_env();
    env["RGPU_TLS"] = "1";
    env["RGPU_TLS_CA"] = f("ca.crt");
    return env;
  }
  static Env with_cert(Env env, const std::string& name) {
    env["RGPU_TLS_CERT"] = f(name + ".crt");
    env["RGPU_TLS_KEY"] = f(name + ".key");
    return env;
  }
  static std::string dir_;
};
std::string Tls::dir_;

// A TCP relay that records every byte in both directions (what a wire tap would see).
class Relay {
 public:
  explicit Relay(uint16_t upstream) : listener_(transport::tcp_listen("127.0.0.1", 0)) {
    thread_ = std::thread([this, upstream] {
      // Bounded like everything else here: a client that never comes ends the relay.
      pollfd l{listener_->fd(), POLLIN, 0};
      if (poll(&l, 1, 60000) <= 0) return;
      auto down = listener_->accept();
      if (!down) return;
      auto up = transport::tcp_connect("127.0.0.1", upstream, 10);
      pollfd p[2] = {{down->fd(), POLLIN, 0}, {up->fd(), POLLIN, 0}};
      char buf[65536];
      for (;;) {
        if (poll(p, 2, 30000) <= 0) return;
        for (int i = 0; i < 2; ++i) {
          if (!(p[i].revents & (POLLIN | POLLHUP | POLLERR))) continue;
          ssize_t n = read(p[i].fd, buf, sizeof buf);
          if (n <= 0) return;
          wire_.append(buf, static_cast<size_t>(n));
          for (ssize_t off = 0; off < n;) {
            ssize_t w = write(p[1 - i].fd, buf + off, static_cast<size_t>(n - off));
            if (w <= 0) return;
            off += w;
          }
        }
      }
    });
  }
  ~Relay() {
    if (thread_.joinable()) thread_.join();
  }
  std::string servers() const { return "127.0.0.1:" + std::to_string(listener_->port()); }
  const std::string& wire() {
    if (thread_.joinable()) thread_.join();
    return wire_;
  }

 private:
  std::unique_ptr<transport::Listener> listener_;
  std::thread thread_;
  std::string wire_;
};

// A TCP relay for any number of connections that keeps, per connection and direction, the first
// bytes and a count (a wire tap between a client or another rgpud and one rgpud).
class TapRelay {
 public:
  struct Flow {
    std::string head[2];  // [0] towards the server, [1] back; the first kKeep bytes
    uint64_t bytes[2] = {0, 0};
  };
  static constexpr size_t kKeep = 4096;

  explicit TapRelay(uint16_t upstream)
      : upstream_(upstream), listener_(transport::tcp_listen("127.0.0.1", 0)) {
    acceptor_ = std::thread([this] {
      while (!stop_) {
        pollfd l{listener_->fd(), POLLIN, 0};
        if (poll(&l, 1, 100) != 1) continue;
        auto down = listener_->accept();
        if (!down) continue;
        auto up = transport::tcp_connect("127.0.0.1", upstream_, 10);
        std::lock_guard<std::mutex> lock(mu_);
        flows_.emplace_back();
        const size_t i = flows_.size() - 1;
        socks_.push_back({std::move(down), std::move(up)});
        threads_.emplace_back([this, i] { pump(i); });
      }
    });
  }
  ~TapRelay() {
    stop_ = true;
    acceptor_.join();
    {
      std::lock_guard<std::mutex> lock(mu_);
      for (auto& [d, u] : socks_) d->shutdown(), u->shutdown();
    }
    for (auto& t : threads_) t.join();
  }
  std::string servers() const { return "127.0.0.1:" + std::to_string(listener_->port()); }
  std::vector<Flow> flows() {
    std::lock_guard<std::mutex> lock(mu_);
    return {flows_.begin(), flows_.end()};
  }

 private:
  void pump(size_t i) {
    int fd[2];
    {
      std::lock_guard<std::mutex> lock(mu_);
      fd[0] = socks_[i].first->fd();
      fd[1] = socks_[i].second->fd();
    }
    pollfd p[2] = {{fd[0], POLLIN, 0}, {fd[1], POLLIN, 0}};
    std::vector<char> buf(1 << 20);
    while (!stop_) {
      if (poll(p, 2, 100) < 0) return;
      for (int k = 0; k < 2; ++k) {
        if (!(p[k].revents & (POLLIN | POLLHUP | POLLERR))) continue;
        ssize_t n = read(p[k].fd, buf.data(), buf.size());
        if (n <= 0) return;
        {
          std::lock_guard<std::mutex> lock(mu_);
          Flow& f = flows_[i];
          if (f.head[k].size() < kKeep)
            f.head[k].append(buf.data(),
                             std::min(static_cast<size_t>(n), kKeep - f.head[k].size()));
          f.bytes[k] += static_cast<uint64_t>(n);
        }
        for (ssize_t off = 0; off < n;) {
          ssize_t w = write(p[1 - k].fd, buf.data() + off, static_cast<size_t>(n - off));
          if (w <= 0) return;
          off += w;
        }
      }
    }
  }

  uint16_t upstream_;
  std::unique_ptr<transport::Listener> listener_;
  std::atomic<bool> stop_{false};
  std::thread acceptor_;
  std::mutex mu_;
  std::deque<Flow> flows_;
  std::deque<
      std::pair<std::unique_ptr<transport::Connection>, std::unique_ptr<transport::Connection>>>
      socks_;
  std::vector<std::thread> threads_;
};

}  // namespace

TEST_F(Tls, ProgramsPassOverTls) {
  Daemon d(server_args());
  Env env = tls_env(d);
  for (const char* p : {"memcpy_roundtrip", "async_streams", "kernels_basic", "kernels_printf"})
    expect_pass(run({cuda_program(p)}, env), p);
  env.erase("LD_LIBRARY_PATH");
  Result ls = run({RGPU_CLI_PATH, "ls"}, env);
  EXPECT_TRUE(has(ls.out, "(tls)")) << ls.out << ls.err;
}

TEST_F(Tls, AServerNoTrustedCaSignedIsRefused) {
  Daemon d(server_args());
  Env env = tls_env(d);
  env["RGPU_TLS_CA"] = f("other-ca.crt");
  Result r = run({cuda_program("mem_info")}, env, 30);
  EXPECT_NE(r.status, 0);
  EXPECT_TRUE(has(r.err, "cannot verify the TLS certificate")) << r.err;
  EXPECT_TRUE(has(r.err, "RGPU_TLS_CA")) << r.err;
  env.erase("RGPU_TLS_CA");  // the system's store does not know the test CA either
  r = run({cuda_program("mem_info")}, env, 30);
  EXPECT_NE(r.status, 0);
  EXPECT_TRUE(has(r.err, "cannot verify the TLS certificate")) << r.err;
}

TEST_F(Tls, ACertificateForAnotherNameIsRefused) {
  Daemon d(server_args());
  Env env = tls_env(d);
  env["RGPU_SERVERS"] = "localhost:" + std::to_string(d.port());  // the certificate: 127.0.0.1
  Result r = run({cuda_program("mem_info")}, env, 30);
  EXPECT_NE(r.status, 0);
  EXPECT_TRUE(has(r.err, "is not valid for this name")) << r.err;
  EXPECT_TRUE(has(r.err, "'localhost'")) << r.err;
}

TEST_F(Tls, APlainClientIsToldToUseTls) {
  Daemon d(server_args());
  Env env = d.client_env();
  env["RGPU_TRANSPORT"] = "tcp";
  Result r = run({cuda_program("mem_info")}, env, 30);
  EXPECT_NE(r.status, 0);
  EXPECT_TRUE(has(r.err, "requires TLS: set RGPU_TLS=1")) << r.err;
  EXPECT_TRUE(d.alive());
  // Shared memory (same machine, the kernel names the peer) is not TCP: unchanged.
  env["RGPU_TRANSPORT"] = "auto";
  expect_pass(run({cuda_program("memcpy_roundtrip")}, env), "memcpy_roundtrip");
}

TEST_F(Tls, ATlsClientOfAPlainServerIsToldSo) {
  Daemon d;
  Result r = run({cuda_program("mem_info")}, tls_env(d), 30);
  EXPECT_NE(r.status, 0);
  EXPECT_TRUE(has(r.err, "--tls-cert")) << r.err;
  EXPECT_TRUE(d.alive());
}

TEST_F(Tls, MutualTlsNeedsAClientCertificateFromItsCa) {
  Daemon d(server_args(true));
  Result none = run({cuda_program("mem_info")}, tls_env(d), 30);
  EXPECT_NE(none.status, 0);
  EXPECT_TRUE(has(none.err, "requires a client certificate")) << none.err;
  EXPECT_TRUE(has(none.err, "RGPU_TLS_CERT")) << none.err;
  Result rogue = run({cuda_program("mem_info")}, with_cert(tls_env(d), "rogue"), 30);
  EXPECT_NE(rogue.status, 0);
  EXPECT_TRUE(has(rogue.err, "refused our certificate")) << rogue.err;
  expect_pass(run({cuda_program("memcpy_roundtrip")}, with_cert(tls_env(d), "client")),
              "memcpy_roundtrip");
}

TEST_F(Tls, TheTokenIsStillRequiredAndNeverOnTheWire) {
  const std::string token = "tls-test-token-7f3a9c";
  std::string token_file = f("token");
  std::ofstream(token_file) << token;
  chmod(token_file.c_str(), 0600);
  Daemon d(plus(server_args(true), {"--token-file", token_file}));
  Env env = with_cert(tls_env(d), "client");
  Result r = run({cuda_program("mem_info")}, env, 30);
  EXPECT_NE(r.status, 0);
  EXPECT_TRUE(has(r.err, "requires authentication: set RGPU_TOKEN")) << r.err;

  Relay relay(d.port());
  env["RGPU_SERVERS"] = relay.servers();
  env["RGPU_TOKEN"] = token;
  env["RGPU_LOG"] = "info";  // how far it got, should it fail
  Result ok = run({cuda_program("mem_info")}, env, 30);
  EXPECT_EQ(ok.status, 0) << ok.err;
  const std::string& wire = relay.wire();
  ASSERT_GT(wire.size(), 1000u);
  EXPECT_EQ(wire[0], 0x16);  // a TLS handshake record
  EXPECT_FALSE(has(wire, token));
  EXPECT_FALSE(has(wire, "mem_info"));  // the client's Hello names its program, in plain TCP
}

TEST_F(Tls, ThePlainWireShowsWhatTlsHides) {
  Daemon d;
  Relay relay(d.port());
  Env env = d.client_env();
  env["RGPU_SERVERS"] = relay.servers();
  env["RGPU_TRANSPORT"] = "tcp";
  Result ok = run({cuda_program("mem_info")}, env, 30);
  EXPECT_EQ(ok.status, 0) << ok.err;
  EXPECT_TRUE(has(relay.wire(), "mem_info"));  // so the test above can fail
}

// Server-to-server copies between rgpuds with TLS (mutual, for clients): the peer link is routed
// in plain by the ticket's id alone (PeerRoute), then runs TLS with the certificate the client saw;
// the copies pass.  The client reaches b through a tap (its connections are TLS from the first
// byte); the peer link goes where b vouched it is (its own listener, docs/architecture.md
// "Security of server-to-server copies"), so both rgpuds' logs show the link and its TLS.
TEST_F(Tls, ServerToServerCopiesRunOverTls) {
  char dir_tmpl[] = "/tmp/rgpu-tls-peer-XXXXXX";
  ASSERT_NE(mkdtemp(dir_tmpl), nullptr);
  const std::string dir = dir_tmpl, log_a = dir + "/a.log", log_b = dir + "/b.log";
  std::string text_a, text_b;
  {
    Daemon a(server_args(true), {{"RGPU_LOG", "info"}}, log_a),
        b(server_args(true), {{"RGPU_LOG", "info"}}, log_b);
    TapRelay tap(b.port());
    Env env = with_cert(tls_env(a), "client");
    env["RGPU_SERVERS"] = a.servers() + "," + tap.servers();
    Result r = run({cuda_program("peer_copies")}, env, 280);
    EXPECT_EQ(r.status, 0) << r.out << r.err;
    EXPECT_NE(r.out.find("peer_copies: passed"), std::string::npos) << r.out << r.err;
    int tls_clients = 0;
    for (const auto& f : tap.flows()) {
      ASSERT_FALSE(f.head[0].empty());
      EXPECT_EQ(f.head[0][0], 0x16) << "a connection to b through the tap that is not TLS";
      tls_clients += f.head[0][0] == 0x16;
    }
    EXPECT_GE(tls_clients, 1);
    EXPECT_TRUE(a.alive() && b.alive());
    std::ifstream in_a(log_a), in_b(log_b);
    std::stringstream sa, sb;
    sa << in_a.rdbuf();
    sb << in_b.rdbuf();
    text_a = sa.str(), text_b = sb.str();
    // a linked to b's own listener, over TLS 1.3; b served a peer link over TLS 1.3.
    EXPECT_TRUE(has(text_a, "peer link to 127.0.0.1:" + std::to_string(b.port()) +
                                " (the client's " + tap.servers() + "): TLSv1.3"))
        << "b at " << b.port() << ", a at " << a.port() << "\n"
        << text_a;
  }
  EXPECT_TRUE(has(text_b, "peer link from ")) << text_b;
  EXPECT_TRUE(std::regex_search(text_b, std::regex("peer link from [^\\n]*: TLSv1\\.3"))) << text_b;
  EXPECT_EQ(system(("rm -rf '" + dir + "'").c_str()), 0);
}

TEST_F(Tls, DaemonOptionsAreChecked) {
  Result half = run({RGPUD_PATH, "--backend", "host", "--tls-cert", f("server.crt")}, {}, 20);
  EXPECT_EQ(half.status, 2);
  EXPECT_TRUE(has(half.err, "--tls-key")) << half.err;
  Result wrong_key = run({RGPUD_PATH, "--backend", "host", "--tls-cert", f("server.crt"),
                          "--tls-key", f("client.key")},
                         {}, 20);
  EXPECT_EQ(wrong_key.status, 2);
  EXPECT_TRUE(has(wrong_key.err, "does not belong to certificate")) << wrong_key.err;
  // Beyond loopback: a server certificate alone authenticates nobody; mutual TLS does.
  std::vector<std::string> argv = {RGPUD_PATH, "--backend", "host", "--listen", "0.0.0.0:0"};
  argv.insert(argv.end(), {"--tls-cert", f("server.crt"), "--tls-key", f("server.key")});
  Result open = run(argv, {}, 20);
  EXPECT_EQ(open.status, 2);
  EXPECT_TRUE(has(open.err, "--tls-client-ca")) << open.err;
  Daemon mutual(plus(server_args(true), {"--listen", "0.0.0.0:0"}));
  EXPECT_TRUE(mutual.alive());
}

TEST_F(Tls, BenchComparesTlsWithPlainTcp) {
  Daemon plain;
  Daemon tls(server_args());
  std::string json = f("bench.json");
  Env env = {{"RGPU_SERVERS", plain.servers()}, {"RGPU_TLS_CA", f("ca.crt")}};
  Result r =
      run({RGPU_CLI_PATH, "bench", "--max-size", "64KiB", "--json", json, "--tls", tls.servers()},
          env, 300);
  EXPECT_EQ(r.status, 0) << r.err;
  EXPECT_TRUE(has(r.out, "TLS (rgpud at " + tls.servers())) << r.out;
  EXPECT_TRUE(has(r.out, "sync call over TLS")) << r.out;
  std::ifstream in(json);
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  EXPECT_TRUE(has(text, "\"op\": \"d2h_pinned\", \"bytes\": 16384, \"mode\": \"rgpu\"")) << text;
  EXPECT_TRUE(has(text, "\"transport\": \"tls\"")) << text;
}
