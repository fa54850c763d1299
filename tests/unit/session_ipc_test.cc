// CUDA IPC between two server sessions (host backend, in one process) and a daemon's export
// registry, driven over the wire protocol directly — no client library, so these are the server's
// own checks, as a tenant with a client of its own meets them (issue 36):
//   - the importer's requests may name the exported allocation and nothing else of its slab;
//   - a handle made before cudaFree opens nothing afterwards; the new buffer gets a new handle;
//   - buffers allocated after an export never lie in the exported slab.
#include <gtest/gtest.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <thread>

#include "backend/host/host_executor.h"
#include "proto/frame.h"
#include "server/ipc_exports.h"
#include "server/session.h"
#include "transport/tcp/tcp.h"

using namespace rgpu;
using namespace rgpu::proto;

namespace {

constexpr uint64_t kSlab = 2ull << 20;
constexpr uint32_t kInvalidResourceHandle = 400;

// The daemon's loop for two control sockets (server/supervisor.cc serves them like this).
class Registry {
 public:
  Registry() {
    for (auto& p : pairs_) EXPECT_EQ(socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, p), 0);
    thread_ = std::thread([this] {
      while (!stop_) {
        pollfd fds[2] = {{pairs_[0][0], POLLIN, 0}, {pairs_[1][0], POLLIN, 0}};
        if (poll(fds, 2, 20) <= 0) continue;
        for (int i = 0; i < 2; ++i) {
          if (!(fds[i].revents & POLLIN)) continue;
          char buf[1024];
          int fd = -1;
          ssize_t n = server::recv_control(fds[i].fd, buf, sizeof buf, fd, MSG_DONTWAIT);
          if (n > 0) ex_.serve(100 + i, fds[i].fd, buf, static_cast<size_t>(n), fd);
        }
      }
    });
  }
  ~Registry() {
    stop_ = true;
    thread_.join();
    for (auto& p : pairs_) {
      close(p[0]);
      close(p[1]);
    }
  }
  int control(int i) const { return pairs_[i][1]; }
  size_t exports() const { return ex_.size(); }  // read while the loop idles (tests only)

 private:
  server::IpcExports ex_;
  int pairs_[2][2] = {};
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

// One tenant: a session with its own host executor, served on a thread, and its wire.
class Tenant {
 public:
  explicit Tenant(int control) {
    int fds[2];
    EXPECT_EQ(socketpair(AF_UNIX, SOCK_STREAM, 0, fds), 0);
    client_ = transport::tcp_adopt(fds[0], "tenant");
    server_ = transport::tcp_adopt(fds[1], "session");
    ledger_ = backend::HostLedger::create(256 << 20);
    thread_ = std::thread([this, control] {
      auto exec = backend::make_host_executor({ledger_});
      server::SessionConfig cfg{std::nullopt, "test"};
      cfg.control = control;
      server::Session s(*server_, *exec, cfg);
      s.run();
      server_->shutdown();
    });
    HelloRep hello;
    EXPECT_EQ(call<HelloMsg>(HelloReq{}, hello), 0) << message;
  }
  ~Tenant() {
    client_->shutdown();
    thread_.join();
  }

  template <class M>
  int32_t call(const typename M::Req& req, typename M::Rep& rep, const void* payload = nullptr,
               uint64_t len = 0) {
    send(static_cast<uint16_t>(M::id), encode_message(req), payload, len);
    std::vector<uint8_t> body;
    FrameHeader h = read(body);
    EXPECT_TRUE(h.flags & kFlagReply);
    return decode_reply(body, rep, message);
  }
  // A request with no reply (cudaFree), then a round trip: the session has served it.
  template <class M>
  void post(const typename M::Req& req) {
    send(static_cast<uint16_t>(M::id), encode_message(req), nullptr, 0);
    Empty e;
    EXPECT_EQ(call<PingMsg>(PingReq{}, e), 0);
  }
  // An asynchronous request (cudaMemset), then a round trip: the error the session reported for
  // it (an AsyncError frame), 0 when none.
  template <class M>
  int32_t post_checked(const typename M::Req& req) {
    send(static_cast<uint16_t>(M::id), encode_message(req), nullptr, 0);
    const uint64_t posted = id_;
    send(static_cast<uint16_t>(MsgId::Ping), encode_message(PingReq{}), nullptr, 0);
    int32_t code = 0;
    std::vector<uint8_t> body;
    for (;;) {
      FrameHeader h = read(body);
      if (h.type == static_cast<uint16_t>(MsgId::AsyncError)) {
        AsyncErrorMsg m = decode_message<AsyncErrorMsg>(body.data(), body.size());
        if (m.request_id == posted) code = m.error;
        continue;
      }
      if (h.flags & kFlagReply) break;
    }
    return code;
  }
  uint64_t malloc(uint64_t size, uint8_t fill) {
    MallocRep m;
    EXPECT_EQ(call<MallocMsg>(MallocReq{0, size, 0}, m), 0) << message;
    std::vector<uint8_t> bytes(size, fill);
    Empty e;
    EXPECT_EQ(call<MemcpyHtoDMsg>(MemcpyHtoDReq{0, m.ptr, size}, e, bytes.data(), size), 0)
        << message;
    return m.ptr;
  }
  // cudaMemcpy device to host: the error, and the bytes in `out` on success.
  int32_t read_device(uint64_t src, uint64_t size, std::vector<uint8_t>& out) {
    send(static_cast<uint16_t>(MsgId::MemcpyDtoH), encode_message(MemcpyDtoHReq{0, src, size}),
         nullptr, 0);
    out.assign(size, 0);
    std::vector<uint8_t> body;
    for (;;) {
      FrameHeader h = read(body);
      if (h.type != static_cast<uint16_t>(MsgId::AsyncData)) {
        Empty none;
        return decode_reply(body, none, message);
      }
      AsyncDataMsg piece = decode_message<AsyncDataMsg>(body.data(), body.size());
      EXPECT_LE(piece.offset + h.payload_len, out.size());
      client_->recv(out.data() + piece.offset, h.payload_len);
    }
  }
  std::string message;

 private:
  void send(uint16_t type, const std::vector<uint8_t>& body, const void* payload, uint64_t len) {
    FrameHeader h{type, 0, static_cast<uint32_t>(body.size()), ++id_, len};
    uint8_t raw[kHeaderSize];
    encode_header(h, raw);
    iovec v[3] = {{raw, sizeof raw},
                  {const_cast<uint8_t*>(body.data()), body.size()},
                  {const_cast<void*>(payload), len}};
    client_->send_all(v, 3);
  }
  // The next frame, past the heartbeats a slow session (a sanitizer build) sends meanwhile.
  FrameHeader read(std::vector<uint8_t>& body) {
    for (;;) {
      uint8_t raw[kHeaderSize];
      client_->recv(raw, sizeof raw);
      FrameHeader h = decode_header(raw);
      body.resize(h.body_len);
      if (h.body_len) client_->recv(body.data(), body.size());
      if (h.type != static_cast<uint16_t>(MsgId::Heartbeat) || (h.flags & kFlagReply)) return h;
    }
  }
  std::unique_ptr<transport::Connection> client_, server_;
  backend::HostLedger* ledger_ = nullptr;
  std::thread thread_;
  uint64_t id_ = 1;
};

bool all(const std::vector<uint8_t>& v, uint8_t b) {
  for (uint8_t x : v)
    if (x != b) return false;
  return !v.empty();
}

// The importer maps in a window of its own: both sessions share this test's address space.  Below
// the exporter's device windows (0x5000...), a PIE program's image and heap (0x55...) and the mmap
// area (0x7f...), above AddressSanitizer's shadow (below 0x10007fff8000) and outside its allocator
// (0x600000000000-0x640000000000).
constexpr uint64_t kImporterWindow = 0x400000000000ull;

uint64_t open_handle(Tenant& t, const IpcGetMemHandleRep& h, int32_t* code = nullptr) {
  IpcOpenMemHandleRep rep;
  int32_t e =
      t.call<IpcOpenMemHandleMsg>(IpcOpenMemHandleReq{0, kImporterWindow, h.token, h.offset}, rep);
  if (code) *code = e;
  return e == 0 ? rep.ptr : 0;
}

TEST(SessionIpc, TheImporterReachesTheExportedAllocationOnly) {
  Registry reg;
  Tenant exporter(reg.control(0)), importer(reg.control(1));
  Empty e;
  ASSERT_EQ(importer.call<AddressWindowMsg>(AddressWindowReq{0, kImporterWindow, 1ull << 40}, e), 0)
      << importer.message;
  const uint64_t x = exporter.malloc(4096, 0xaa), a = exporter.malloc(4096, 0x11),
                 y = exporter.malloc(4096, 0xbb);
  ASSERT_EQ(x / kSlab, a / kSlab);  // neighbours in one slab
  ASSERT_EQ(y / kSlab, a / kSlab);
  IpcGetMemHandleRep h;
  ASSERT_EQ(exporter.call<IpcGetMemHandleMsg>(IpcGetMemHandleReq{0, a + 100}, h), 0)
      << exporter.message;
  EXPECT_EQ(h.offset, 0u);  // a handle names the allocation

  IpcOpenMemHandleRep rep;
  ASSERT_EQ(importer.call<IpcOpenMemHandleMsg>(
                IpcOpenMemHandleReq{0, kImporterWindow, h.token, h.offset}, rep),
            0)
      << importer.message;
  EXPECT_EQ(rep.size, 4096u);  // the allocation, not its slab
  EXPECT_EQ(rep.base, rep.ptr);
  const uint64_t p = rep.ptr;
  std::vector<uint8_t> got;
  ASSERT_EQ(importer.read_device(p, 4096, got), 0) << importer.message;
  EXPECT_TRUE(all(got, 0x11));
  // Past the end, the neighbours (whose bytes lie in the same mapping): refused by the server.
  EXPECT_EQ(importer.read_device(p + 4096, 256, got), err::InvalidValue);
  EXPECT_EQ(importer.read_device(p, 4097, got), err::InvalidValue);
  EXPECT_EQ(importer.read_device(p - (a - x), 256, got), err::InvalidValue);
  EXPECT_EQ(importer.read_device(p + (y - a), 256, got), err::InvalidValue);
  EXPECT_EQ(importer.post_checked<MemsetMsg>(MemsetReq{0, p + 4096, 0, 16, 0}), err::InvalidValue);
  EXPECT_EQ(importer.post_checked<MemsetMsg>(MemsetReq{0, p - 4096, 0, 16, 0}), err::InvalidValue);
  ASSERT_EQ(importer.post_checked<MemsetMsg>(MemsetReq{0, p, 0x44, 4096, 0}), 0);
  ASSERT_EQ(importer.call<DeviceSynchronizeMsg>(DeviceReq{0}, e), 0);
  ASSERT_EQ(exporter.read_device(a, 4096, got), 0);
  EXPECT_TRUE(all(got, 0x44)) << "the importer's write reached the exporter";
  ASSERT_EQ(exporter.read_device(y, 4096, got), 0);
  EXPECT_TRUE(all(got, 0xbb)) << "the neighbour kept its bytes";

  // Allocated after the export, the same size: never in the exported slab, even once a block
  // there is freed.
  exporter.post<FreeMsg>(FreeReq{0, x});
  for (int i = 0; i < 4; ++i) EXPECT_NE(exporter.malloc(4096, 0xcc) / kSlab, a / kSlab);
  EXPECT_EQ(importer.call<IpcCloseMemHandleMsg>(IpcCloseMemHandleReq{0, rep.base}, e), 0)
      << importer.message;
  EXPECT_NE(importer.call<IpcCloseMemHandleMsg>(IpcCloseMemHandleReq{0, rep.base}, e), 0);
}

// Parameter: the buffer's size (a slab's block; a large allocation's own mapping).
class SessionIpcSized : public ::testing::TestWithParam<uint64_t> {};

TEST_P(SessionIpcSized, AHandleDiesWithItsAllocation) {
  const uint64_t size = GetParam();
  Registry reg;
  Tenant exporter(reg.control(0)), importer(reg.control(1));
  Empty e;
  ASSERT_EQ(importer.call<AddressWindowMsg>(AddressWindowReq{0, kImporterWindow, 1ull << 40}, e),
            0);
  const uint64_t a = exporter.malloc(size, 0x11);
  IpcGetMemHandleRep old_h, again;
  ASSERT_EQ(exporter.call<IpcGetMemHandleMsg>(IpcGetMemHandleReq{0, a}, old_h), 0)
      << exporter.message;
  ASSERT_EQ(exporter.call<IpcGetMemHandleMsg>(IpcGetMemHandleReq{0, a}, again), 0);
  EXPECT_EQ(old_h.token, again.token);  // the same allocation: the same handle
  EXPECT_EQ(reg.exports(), 1u);
  exporter.post<FreeMsg>(FreeReq{0, a});
  EXPECT_EQ(reg.exports(), 0u);  // withdrawn at the free
  // The same size again (rgpu may put it at the same address): a new allocation, a new handle.
  const uint64_t b = exporter.malloc(size, 0x22);
  IpcGetMemHandleRep new_h;
  ASSERT_EQ(exporter.call<IpcGetMemHandleMsg>(IpcGetMemHandleReq{0, b}, new_h), 0);
  EXPECT_NE(new_h.token, old_h.token);
  int32_t code = 0;
  EXPECT_EQ(open_handle(importer, old_h, &code), 0u);
  EXPECT_EQ(code, static_cast<int32_t>(kInvalidResourceHandle));
  EXPECT_NE(importer.message.find("freed"), std::string::npos) << importer.message;
  const uint64_t q = open_handle(importer, new_h, &code);
  ASSERT_EQ(code, 0) << importer.message;
  std::vector<uint8_t> got;
  ASSERT_EQ(importer.read_device(q, size, got), 0);
  EXPECT_TRUE(all(got, 0x22)) << "the new handle opens the new buffer";
  // A device reset withdraws the exports of the device.
  ASSERT_EQ(exporter.call<DeviceResetMsg>(DeviceReq{0}, e), 0) << exporter.message;
  EXPECT_EQ(reg.exports(), 0u);
}

INSTANTIATE_TEST_SUITE_P(Sizes, SessionIpcSized, ::testing::Values(4096u, 3u << 20),
                         [](const auto& info) {
                           return std::string(info.param < (1u << 20) ? "Small" : "Large");
                         });

}  // namespace
