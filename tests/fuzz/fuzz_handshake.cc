// Fuzz target: the server side of a session, host backend.  The input (after one byte choosing
// whether the server has a token) is everything a client sends over a socket pair: the handshake
// first (Hello, Auth), then — when the fuzzer finds its way through — any requests.  The session
// must end cleanly when the bytes run out, whatever they were, and give back everything it
// allocated (the host backend's ledger returns to zero).
#include <sys/socket.h>
#include <unistd.h>

#include <cstdlib>
#include <thread>

#include "backend/host/host_executor.h"
#include "common/log.h"
#include "server/session.h"
#include "transport/tcp/tcp.h"

using namespace rgpu;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static backend::HostLedger* ledger = [] {
    log::init("fuzz", log::Level::Error);
    return backend::HostLedger::create(64u << 20);
  }();
  if (size < 1) return 0;
  const bool token = data[0] & 1;
  data += 1, size -= 1;
  int fds[2];
  if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, fds) != 0) abort();
  std::thread writer([&] {
    for (size_t done = 0; done < size;) {
      ssize_t n = send(fds[0], data + done, size - done, MSG_NOSIGNAL);
      if (n <= 0) break;  // the session closed the connection
      done += static_cast<size_t>(n);
    }
    shutdown(fds[0], SHUT_WR);
  });
  std::thread drain([&] {
    char buf[1 << 16];
    while (recv(fds[0], buf, sizeof buf, 0) > 0) {
    }
  });
  {
    auto conn = transport::tcp_adopt(fds[1], "fuzz-client");
    auto exec = backend::make_host_executor({ledger});
    server::SessionConfig cfg{token ? std::optional<std::string>("fuzz-token") : std::nullopt,
                              "fuzz"};
    {
      server::Session session(*conn, *exec, cfg);
      session.run();
    }
    conn->shutdown();
  }
  writer.join();
  drain.join();
  close(fds[0]);
  if (ledger->used() != 0) abort();   // the session leaked device memory
  ledger->release_process(getpid());  // the executor's slot, for the next run
  return 0;
}
