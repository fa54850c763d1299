// TLS connections: OpenSSL over a non-blocking socket, every SSL call under the connection's lock,
// waits (poll) outside it, so a receiving thread and a sending thread never block each other.
#include "transport/tls/tls.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <mutex>
#include <vector>

#include "transport/tls/openssl_api.h"

namespace rgpu::transport {

extern thread_local bool t_certificate_requested;  // tls_context.cc

namespace {

using ossl::api;
using Kind = TlsError::Kind;
using Clock = std::chrono::steady_clock;

// Pieces smaller than this are gathered into one record (a frame's header and body); larger ones
// go to SSL_write directly, which cuts them into full 16 KiB records without another copy.
constexpr size_t kGather = 16 << 10;
// The most one SSL_write is given, so a receiving thread waits at most this much encryption.
constexpr size_t kMaxWrite = 1 << 20;

// OpenSSL writes to the socket with write(2), not send(MSG_NOSIGNAL): a write to a peer that has
// gone would raise SIGPIPE and kill a program that did not ignore it (a CUDA program using the
// client library).  SIGPIPE is blocked in this thread around the call, and one the call left
// pending is consumed before the old mask returns.
class NoSigpipe {
 public:
  NoSigpipe() {
    sigemptyset(&pipe_);
    sigaddset(&pipe_, SIGPIPE);
    pthread_sigmask(SIG_BLOCK, &pipe_, &old_);
    sigset_t pending;
    sigpending(&pending);
    was_pending_ = sigismember(&pending, SIGPIPE) == 1;
  }
  ~NoSigpipe() {
    sigset_t pending;
    if (!was_pending_ && sigpending(&pending) == 0 && sigismember(&pending, SIGPIPE) == 1) {
      timespec zero{0, 0};
      sigtimedwait(&pipe_, nullptr, &zero);
    }
    pthread_sigmask(SIG_SETMASK, &old_, nullptr);
  }
  NoSigpipe(const NoSigpipe&) = delete;
  NoSigpipe& operator=(const NoSigpipe&) = delete;

 private:
  sigset_t pipe_, old_;
  bool was_pending_ = false;
};

int take_socket(Connection& tcp) {
  if (std::string(tcp.kind()) != "tcp") throw TransportError("TLS runs over TCP connections only");
  int fd = ::dup(tcp.fd());  // the socket outlives the TCP connection object
  if (fd < 0) throw TransportError(std::string("dup failed: ") + strerror(errno));
  fcntl(fd, F_SETFD, FD_CLOEXEC);
  fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
  return fd;
}

// The reason of the last OpenSSL error of this thread, 0 when none.
int last_reason() {
  unsigned long e = api().ERR_peek_last_error();
  return e ? ERR_GET_REASON(e) : 0;
}

class TlsConnection final : public Connection {
 public:
  TlsConnection(int fd, SSL* ssl, std::string peer) : fd_(fd), ssl_(ssl), peer_(std::move(peer)) {}
  ~TlsConnection() override {
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (!down_.load()) {  // close_notify, best effort (non-blocking)
        NoSigpipe quiet;
        api().SSL_shutdown(ssl_);
      }
      api().ERR_clear_error();
      api().SSL_free(ssl_);
    }
    ::close(fd_);
  }

  // Runs SSL_connect/SSL_accept to completion within timeout_s.
  void handshake(bool client, int timeout_s) {
    auto deadline = Clock::now() + std::chrono::seconds(timeout_s);
    for (;;) {
      int r, err;
      {
        std::lock_guard<std::mutex> lock(mu_);
        NoSigpipe quiet;
        api().ERR_clear_error();
        r = client ? api().SSL_connect(ssl_) : api().SSL_accept(ssl_);
        err = r == 1 ? 0 : api().SSL_get_error(ssl_, r);
      }
      if (r == 1) return;
      int left = static_cast<int>(
          std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count());
      if ((err == SSL_ERROR_WANT_READ || err == SSL_ERROR_WANT_WRITE) && left > 0) {
        if (!wait(err == SSL_ERROR_WANT_READ ? POLLIN : POLLOUT, left))
          throw TlsError(Kind::Other, "TLS handshake with " + peer_ + " timed out after " +
                                          std::to_string(timeout_s) + " s");
        continue;
      }
      if (err == SSL_ERROR_WANT_READ || err == SSL_ERROR_WANT_WRITE)
        throw TlsError(Kind::Other, "TLS handshake with " + peer_ + " timed out after " +
                                        std::to_string(timeout_s) + " s");
      throw handshake_error(client, err);
    }
  }

  void send_all(const iovec* iov, int count) override {
    std::lock_guard<std::mutex> send_lock(send_mu_);
    for (int k = 0; k < count; ++k) {
      const char* p = static_cast<const char*>(iov[k].iov_base);
      size_t n = iov[k].iov_len;
      if (n < kGather) {
        if (gather_.size() + n > kGather) flush();
        gather_.insert(gather_.end(), p, p + n);
      } else {
        flush();
        write(p, n);
      }
    }
    flush();
  }

  void recv_all(const iovec* iov, int count) override {
    for (int k = 0; k < count; ++k) {
      char* p = static_cast<char*>(iov[k].iov_base);
      size_t left = iov[k].iov_len;
      while (left) {
        size_t n = read_some(p, left);
        if (n == 0) throw TransportError("connection to " + peer_ + " closed by peer", true);
        p += n, left -= n;
      }
    }
  }

  bool recv_or_eof(void* buf, size_t len) override { return first_or_eof(buf, len, false); }
  bool recv_idle_or_eof(void* buf, size_t len) override { return first_or_eof(buf, len, true); }
  bool first_or_eof(void* buf, size_t len, bool idle) {
    if (len == 0) return true;
    size_t n = read_some(buf, len, idle);
    if (n == 0) return false;
    if (n < len) {
      iovec v{static_cast<char*>(buf) + n, len - n};
      try {
        recv_all(&v, 1);
      } catch (const TransportError& e) {
        if (e.closed)
          throw TransportError("connection to " + peer_ + " closed in the middle of a message",
                               true);
        throw;
      }
    }
    return true;
  }

  std::string peer() const override { return peer_; }
  void shutdown() override {
    down_.store(true);
    ::shutdown(fd_, SHUT_RDWR);  // wakes both sides' waits; no SSL call here (no lock needed)
  }
  int fd() const override { return fd_; }
  void set_recv_timeout(int seconds) override { recv_timeout_ms_.store(seconds * 1000); }
  void set_send_timeout(int seconds) override { send_timeout_ms_.store(seconds * 1000); }
  const char* kind() const override { return "tls"; }

  // The name the server's certificate must carry: an IP address as an IP SAN, else a DNS name
  // (also sent as SNI).
  void set_expected_name(const std::string& name) {
    const auto& a = api();
    unsigned char addr[16];
    bool ip =
        inet_pton(AF_INET, name.c_str(), addr) == 1 || inet_pton(AF_INET6, name.c_str(), addr) == 1;
    int ok = ip ? a.X509_VERIFY_PARAM_set1_ip_asc(a.SSL_get0_param(ssl_), name.c_str())
                : a.SSL_set1_host(ssl_, name.c_str());
    if (!ip)
      a.SSL_ctrl(ssl_, SSL_CTRL_SET_TLSEXT_HOSTNAME, TLSEXT_NAMETYPE_host_name,
                 const_cast<char*>(name.c_str()));
    if (ok != 1)
      throw TlsError(Kind::Other,
                     "cannot check the server's name " + name + ": " + ossl::errors("bad name"));
  }

  // SHA-256 of the peer's certificate; all zero when it sent none.
  CertFingerprint peer_fingerprint() {
    std::lock_guard<std::mutex> lock(mu_);
    const auto& a = api();
    CertFingerprint out{};
    X509* cert = a.SSL_get1_peer_certificate(ssl_);
    if (!cert) return out;
    unsigned int len = 0;
    if (a.X509_digest(cert, a.EVP_sha256(), out.data(), &len) != 1 || len != out.size()) out = {};
    a.X509_free(cert);
    return out;
  }

  std::string summary() {
    std::lock_guard<std::mutex> lock(mu_);
    const auto& a = api();
    const char* cipher = a.SSL_CIPHER_get_name(a.SSL_get_current_cipher(ssl_));
    bool ktx = a.BIO_ctrl(a.SSL_get_wbio(ssl_), BIO_CTRL_GET_KTLS_SEND, 0, nullptr) > 0;
    bool krx = a.BIO_ctrl(a.SSL_get_rbio(ssl_), BIO_CTRL_GET_KTLS_RECV, 0, nullptr) > 0;
    return std::string(a.SSL_get_version(ssl_)) + ", " + (cipher ? cipher : "?") +
           ", kernel TLS send " + (ktx ? "on" : "off") + ", receive " + (krx ? "on" : "off");
  }

 private:
  void flush() {
    if (gather_.empty()) return;
    write(gather_.data(), gather_.size());
    gather_.clear();
  }

  void write(const char* p, size_t n) {
    while (n) {
      size_t chunk = std::min(n, kMaxWrite), done = 0;
      int r, err;
      {
        std::lock_guard<std::mutex> lock(mu_);
        NoSigpipe quiet;
        api().ERR_clear_error();
        r = api().SSL_write_ex(ssl_, p, chunk, &done);
        err = r == 1 ? 0 : api().SSL_get_error(ssl_, r);
      }
      if (r == 1) {
        p += done, n -= done;
      } else if (err == SSL_ERROR_WANT_WRITE || err == SSL_ERROR_WANT_READ) {
        int ms = send_timeout_ms_.load();
        if (!wait(err == SSL_ERROR_WANT_WRITE ? POLLOUT : POLLIN, ms > 0 ? ms : -1))
          throw TransportError("send to " + peer_ + " made no progress for " +
                                   std::to_string(ms / 1000) + " s (the peer took no data)",
                               false, true);
      } else {
        int e = errno;
        bool closed = err == SSL_ERROR_ZERO_RETURN || e == EPIPE || e == ECONNRESET || down_;
        throw TransportError("send to " + peer_ + " failed: " + io_error(err, e), closed);
      }
    }
  }

  // At least one byte, or 0 when the peer closed (close_notify, or the socket ended).
  size_t read_some(void* p, size_t n, bool idle = false) {
    for (;;) {
      size_t got = 0;
      int r, err;
      {
        std::lock_guard<std::mutex> lock(mu_);
        NoSigpipe quiet;  // a read may write too: an alert, a key update's answer
        api().ERR_clear_error();
        r = api().SSL_read_ex(ssl_, p, n, &got);
        err = r == 1 ? 0 : api().SSL_get_error(ssl_, r);
      }
      if (r == 1) return got;
      int e = errno;
      if (err == SSL_ERROR_WANT_READ || err == SSL_ERROR_WANT_WRITE) {
        int ms = idle ? 0 : recv_timeout_ms_.load();
        if (!wait(err == SSL_ERROR_WANT_READ ? POLLIN : POLLOUT, ms > 0 ? ms : -1))
          throw TransportError(
              "receive from " + peer_ + " failed: no data for " + std::to_string(ms / 1000) + " s",
              false, true);
        continue;
      }
      if (err == SSL_ERROR_ZERO_RETURN) return 0;
      if (err == SSL_ERROR_SYSCALL && (e == 0 || e == ECONNRESET || e == EPIPE)) return 0;
      if (err == SSL_ERROR_SSL && last_reason() == SSL_R_UNEXPECTED_EOF_WHILE_READING) return 0;
      if (down_) return 0;
      throw TransportError("receive from " + peer_ + " failed: " + io_error(err, e), false);
    }
  }

  // Waits for `events` on the socket; false after timeout_ms (-1: no limit).
  bool wait(short events, int timeout_ms) {
    pollfd p{fd_, events, 0};
    for (;;) {
      int r = ::poll(&p, 1, timeout_ms);
      if (r > 0) return true;
      if (r == 0) return false;
      if (errno != EINTR) throw TransportError(std::string("poll failed: ") + strerror(errno));
    }
  }

  std::string io_error(int err, int e) {
    if (err == SSL_ERROR_SYSCALL) return e ? strerror(e) : "connection ended";
    int reason = last_reason();
    std::string text = ossl::errors("TLS error " + std::to_string(err));
    if (reason == SSL_R_TLSV13_ALERT_CERTIFICATE_REQUIRED)
      return "the peer requires a client certificate (" + text + ")";
    if (reason == SSL_R_TLSV1_ALERT_UNKNOWN_CA || reason == SSL_R_SSLV3_ALERT_BAD_CERTIFICATE ||
        reason == SSL_R_SSLV3_ALERT_CERTIFICATE_UNKNOWN)
      return "the peer refused our certificate (" + text + ")";
    return text;
  }

  TlsError handshake_error(bool client, int err) {
    const auto& a = api();
    int e = errno;
    long v = a.SSL_get_verify_result(ssl_);
    if (client && v != X509_V_OK) {
      std::string why = a.X509_verify_cert_error_string(v);
      a.ERR_clear_error();
      if (v == X509_V_ERR_HOSTNAME_MISMATCH || v == X509_V_ERR_IP_ADDRESS_MISMATCH)
        return TlsError(Kind::WrongName, "the TLS certificate of " + peer_ +
                                             " is not valid for this name (" + why + ")");
      return TlsError(Kind::ServerUnverified,
                      "cannot verify the TLS certificate of " + peer_ + ": " + why);
    }
    if (client && t_certificate_requested)
      return TlsError(Kind::NeedClientCert, peer_ + " requires a client certificate (mutual TLS)");
    int reason = last_reason();
    if (reason == SSL_R_WRONG_VERSION_NUMBER || reason == SSL_R_PACKET_LENGTH_TOO_LONG ||
        reason == SSL_R_HTTP_REQUEST || reason == SSL_R_UNEXPECTED_EOF_WHILE_READING ||
        (err == SSL_ERROR_SYSCALL && (e == 0 || e == ECONNRESET)))
      return TlsError(Kind::NotTlsPeer,
                      peer_ +
                          " closed the connection or answered without TLS during the TLS "
                          "handshake (" +
                          io_error(err, e) + ")");
    return TlsError(Kind::Other, "TLS handshake with " + peer_ + " failed: " + io_error(err, e));
  }

  int fd_;
  SSL* ssl_;
  std::string peer_;
  std::mutex mu_;       // every SSL call
  std::mutex send_mu_;  // gather_
  std::vector<char> gather_;
  std::atomic<int> recv_timeout_ms_{0};
  std::atomic<int> send_timeout_ms_{0};
  std::atomic<bool> down_{false};
};

std::unique_ptr<TlsConnection> wrap(std::unique_ptr<Connection> tcp, const TlsContext& ctx) {
  int fd = take_socket(*tcp);
  std::string peer = tcp->peer();
  tcp.reset();
  SSL* ssl = api().SSL_new(static_cast<SSL_CTX*>(ctx.native()));
  if (!ssl || api().SSL_set_fd(ssl, fd) != 1) {
    if (ssl) api().SSL_free(ssl);
    ::close(fd);
    throw TlsError(Kind::Other, ossl::errors("cannot create a TLS connection"));
  }
  return std::make_unique<TlsConnection>(fd, ssl, peer);
}

}  // namespace

std::unique_ptr<Connection> tls_connect(std::unique_ptr<Connection> tcp, const TlsContext& ctx,
                                        const std::string& host, int timeout_s) {
  auto c = wrap(std::move(tcp), ctx);
  // The name the certificate must carry: an IP address as an IP SAN, else a DNS name (also sent
  // as SNI).
  std::string name = host;
  if (name.size() > 2 && name.front() == '[' && name.back() == ']')
    name = name.substr(1, name.size() - 2);
  c->set_expected_name(name);
  t_certificate_requested = false;
  c->handshake(true, timeout_s);
  // TLS 1.3 completes the client's handshake before the server judges its certificate: a
  // request we could not answer is reported now rather than as the server's alert later.
  if (t_certificate_requested)
    throw TlsError(Kind::NeedClientCert, c->peer() + " requires a client certificate (mutual TLS)");
  return c;
}

std::unique_ptr<Connection> tls_connect_pinned(std::unique_ptr<Connection> tcp,
                                               const TlsContext& ctx, const CertFingerprint& pin,
                                               int timeout_s) {
  auto c = wrap(std::move(tcp), ctx);
  t_certificate_requested = false;
  c->handshake(true, timeout_s);
  const CertFingerprint seen = c->peer_fingerprint();
  unsigned diff = 0;
  for (size_t i = 0; i < pin.size(); ++i) diff |= static_cast<unsigned>(seen[i] ^ pin[i]);
  if (diff || seen == CertFingerprint{})
    throw TlsError(Kind::ServerUnverified, "the TLS certificate of " + c->peer() +
                                               " is not the one its rgpud showed the client");
  return c;
}

FirstBytes peek_first_bytes(const Connection& tcp, int timeout_s) {
  pollfd p{tcp.fd(), POLLIN, 0};
  for (;;) {
    int r = ::poll(&p, 1, timeout_s * 1000);
    if (r == 0) return FirstBytes::None;
    if (r < 0 && errno == EINTR) continue;
    if (r < 0) return FirstBytes::None;
    break;
  }
  unsigned char b = 0;
  ssize_t n;
  do n = ::recv(tcp.fd(), &b, 1, MSG_PEEK);
  while (n < 0 && errno == EINTR);
  if (n != 1) return FirstBytes::None;
  return b == 0x16 ? FirstBytes::Tls : FirstBytes::NotTls;  // 0x16: a handshake record
}

std::unique_ptr<Connection> tls_accept(std::unique_ptr<Connection> tcp, const TlsContext& ctx,
                                       int timeout_s) {
  auto c = wrap(std::move(tcp), ctx);
  c->handshake(false, timeout_s);
  return c;
}

std::string tls_summary(const Connection& c) {
  auto* t = dynamic_cast<const TlsConnection*>(&c);
  return t ? const_cast<TlsConnection*>(t)->summary() : "";
}

}  // namespace rgpu::transport
