// The shared-memory provider: reaches a rgpud on this machine through its abstract unix socket
// @rgpud-<TCP port>.  Phase 1 of accepting takes the unix socket; phase 2 (in the session process)
// receives, checks and maps the client's segment.
#include <sys/socket.h>
#include <unistd.h>

#include <memory>

#include "transport/provider.h"
#include "transport/shm/shm.h"

namespace rgpu::transport {
namespace {

class ShmPending final : public PendingConnection {
 public:
  explicit ShmPending(int sock) : sock_(sock) {
    ucred cred{};
    socklen_t len = sizeof cred;
    // The kernel names the peer: a local user cannot pose as another.
    source_ = getsockopt(sock, SOL_SOCKET, SO_PEERCRED, &cred, &len) == 0
                  ? "uid " + std::to_string(cred.uid)
                  : "uid ?";
  }
  ~ShmPending() override {
    if (sock_ >= 0) ::close(sock_);
  }
  std::string peer() const override { return "(shm " + source_ + ")"; }
  std::string source() const override { return source_; }
  std::unique_ptr<Connection> finish(int timeout_s) override {
    if (sock_ < 0) throw TransportError("a shared-memory connection was finished twice");
    int s = sock_;
    sock_ = -1;
    return shm_adopt(s, timeout_s);  // closes the socket when it throws
  }

 private:
  int sock_;
  std::string source_;
};

class ShmProviderListener final : public ProviderListener {
 public:
  explicit ShmProviderListener(std::unique_ptr<Listener> l) : l_(std::move(l)) {}
  std::unique_ptr<PendingConnection> accept() override {
    int s = shm_accept(*l_);
    return s >= 0 ? std::make_unique<ShmPending>(s) : nullptr;
  }
  int fd() const override { return l_->fd(); }
  uint16_t port() const override { return 0; }
  bool is_loopback() const override { return true; }
  std::string address() const override { return l_->address(); }

 private:
  std::unique_ptr<Listener> l_;
};

class ShmProvider final : public Provider {
 public:
  const char* name() const override { return "shm"; }
  Capabilities capabilities() const override {
    Capabilities c;
    c.passes_descriptors = c.registers_memory = c.co_located_only = true;
    return c;
  }
  // A futex wake-up and a memcpy into the ring each way.
  Cost cost() const override { return Cost{5.0, 8.0}; }
  std::unique_ptr<Connection> connect(const Endpoint& server, int timeout_s) const override {
    return shm_connect(shm_socket_name(server.port), timeout_s);
  }
  std::unique_ptr<ProviderListener> listen(const Endpoint& local) const override {
    return std::make_unique<ShmProviderListener>(shm_listen(shm_socket_name(local.port)));
  }
  bool listens_locally(const Endpoint&) const override { return true; }
};

}  // namespace

std::unique_ptr<Provider> make_shm_provider() { return std::make_unique<ShmProvider>(); }

}  // namespace rgpu::transport
