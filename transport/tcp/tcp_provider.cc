// The TCP provider: reaches any host; phase 1 of accepting takes the socket, phase 2 has nothing
// more to do (TLS, where configured, is the caller's wrapping: Capabilities::tls_wraps).
#include <memory>

#include "transport/provider.h"
#include "transport/tcp/tcp.h"

namespace rgpu::transport {
namespace {

class TcpPending final : public PendingConnection {
 public:
  explicit TcpPending(std::unique_ptr<Connection> c)
      : conn_(std::move(c)), source_(tcp_source_key(conn_->fd())) {}
  std::string peer() const override { return conn_ ? conn_->peer() : "(taken)"; }
  std::string source() const override { return source_; }
  std::unique_ptr<Connection> finish(int /*timeout_s*/) override {
    if (!conn_) throw TransportError("a TCP connection was finished twice");
    return std::move(conn_);
  }

 private:
  std::unique_ptr<Connection> conn_;
  std::string source_;
};

class TcpProviderListener final : public ProviderListener {
 public:
  explicit TcpProviderListener(std::unique_ptr<Listener> l) : l_(std::move(l)) {}
  std::unique_ptr<PendingConnection> accept() override {
    auto c = l_->accept();
    return c ? std::make_unique<TcpPending>(std::move(c)) : nullptr;
  }
  int fd() const override { return l_->fd(); }
  uint16_t port() const override { return l_->port(); }
  bool is_loopback() const override { return l_->is_loopback(); }
  std::string address() const override { return l_->address(); }

 private:
  std::unique_ptr<Listener> l_;
};

class TcpProvider final : public Provider {
 public:
  const char* name() const override { return "tcp"; }
  Capabilities capabilities() const override {
    Capabilities c;
    c.tls_wraps = true;
    return c;
  }
  // Loopback round trips measure tens of microseconds; a network link is slower still.
  Cost cost() const override { return Cost{30.0, 2.0}; }
  std::unique_ptr<Connection> connect(const Endpoint& server, int timeout_s) const override {
    return tcp_connect(server.host, server.port, timeout_s);
  }
  std::unique_ptr<ProviderListener> listen(const Endpoint& local) const override {
    return std::make_unique<TcpProviderListener>(tcp_listen(local.host, local.port));
  }
  bool listens_locally(const Endpoint& local) const override {
    return tcp_host_is_loopback(local.host);
  }
};

}  // namespace

std::unique_ptr<Provider> make_tcp_provider() { return std::make_unique<TcpProvider>(); }

}  // namespace rgpu::transport
