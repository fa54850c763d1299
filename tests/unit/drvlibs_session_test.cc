// The drvlibs handlers on a server session (host backend, socket pair): nothing the client sends
// is trusted.  Tensor map arrays must match the rank before the backend (a driver reads `rank`
// entries) sees them; stream memory operations name memory of the session, aligned, with known
// operations and flags; link states are the session's, their images read back within bounds.
// Every refusal names what was wrong and the session goes on.
#include <gtest/gtest.h>
#include <sys/socket.h>

#include <cstring>
#include <thread>

#include "backend/host/host_drvlibs.h"
#include "backend/host/host_executor.h"
#include "backend/host/host_ledger.h"
#include "proto/frame.h"
#include "server/session.h"
#include "transport/tcp/tcp.h"

using namespace rgpu;
using namespace rgpu::proto;

namespace {

class DrvlibsSession : public ::testing::Test {
 protected:
  void SetUp() override {
    int fds[2];
    ASSERT_EQ(socketpair(AF_UNIX, SOCK_STREAM, 0, fds), 0);
    client_ = transport::tcp_adopt(fds[0], "test-client");
    server_conn_ = transport::tcp_adopt(fds[1], "test-server");
    ledger_ = backend::HostLedger::create(64 << 20);
    thread_ = std::thread([this] {
      auto exec = backend::make_host_executor({ledger_});
      server::Session s(*server_conn_, *exec, server::SessionConfig{std::nullopt, "test"});
      s.run();
      server_conn_->shutdown();
    });
    HelloRep hello;
    ASSERT_EQ(call<HelloMsg>(HelloReq{}, hello), 0) << msg_;
  }
  void TearDown() override {
    if (client_) client_->shutdown();
    if (thread_.joinable()) thread_.join();
  }
  template <class M>
  void send(const typename M::Req& req, const void* payload = nullptr, uint64_t len = 0) {
    std::vector<uint8_t> body = encode_message(req);
    FrameHeader h{static_cast<uint16_t>(M::id), 0, static_cast<uint32_t>(body.size()), ++id_, len};
    uint8_t raw[kHeaderSize];
    encode_header(h, raw);
    iovec v[3] = {{raw, sizeof raw}, {body.data(), body.size()}, {const_cast<void*>(payload), len}};
    client_->send_all(v, 3);
  }
  FrameHeader read(std::vector<uint8_t>& body) {
    uint8_t raw[kHeaderSize];
    client_->recv(raw, sizeof raw);
    FrameHeader h = decode_header(raw);
    body.resize(h.body_len);
    if (h.body_len) client_->recv(body.data(), body.size());
    return h;
  }
  template <class M>
  int32_t call(const typename M::Req& req, typename M::Rep& rep, const void* payload = nullptr,
               uint64_t len = 0) {
    send<M>(req, payload, len);
    std::vector<uint8_t> body;
    for (;;) {
      FrameHeader h = read(body);
      if (h.type == static_cast<uint16_t>(MsgId::AsyncError)) {
        async_.push_back(decode_message<AsyncErrorMsg>(body.data(), body.size()));
        continue;
      }
      if (!(h.flags & kFlagReply)) continue;  // heartbeats, payload credit
      return decode_reply(body, rep, msg_);
    }
  }
  // The asynchronous error of the request just sent (a ping after it collects it).
  int32_t async_error() {
    async_.clear();
    PingRep p;
    EXPECT_EQ(call<PingMsg>(PingReq{}, p), 0);
    return async_.empty() ? 0 : async_.back().error;
  }
  TensorMapEncodeReq tiled(uint64_t address) {
    TensorMapEncodeReq q;
    q.kind = 0, q.data_type = 7, q.rank = 2, q.address = address;
    q.dims = {64, 32};
    q.strides = {256};
    q.box = {32, 16};
    q.elem_strides = {1, 1};
    return q;
  }

  std::unique_ptr<transport::Connection> client_, server_conn_;
  backend::HostLedger* ledger_ = nullptr;
  std::thread thread_;
  uint64_t id_ = 0;
  std::string msg_;
  std::vector<AsyncErrorMsg> async_;
};

TEST_F(DrvlibsSession, TensorMapArraysMustMatchTheRank) {
  TensorMapRep rep;
  ASSERT_EQ(call<TensorMapEncodeMsg>(tiled(0x1000), rep), 0) << msg_;
  uint64_t magic;
  std::memcpy(&magic, rep.map.data(), 8);
  EXPECT_EQ(magic, backend::kHostTensorMapMagic);
  auto q = tiled(0x1000);
  q.rank = 5;  // the arrays hold 2 entries: a driver would read past them
  EXPECT_EQ(call<TensorMapEncodeMsg>(q, rep), err::InvalidValue);
  EXPECT_NE(msg_.find("do not match rank 5"), std::string::npos) << msg_;
  q = tiled(0x1000);
  q.rank = 9;
  EXPECT_EQ(call<TensorMapEncodeMsg>(q, rep), err::InvalidValue);
  q = tiled(0x1000);
  q.kind = 7;
  EXPECT_EQ(call<TensorMapEncodeMsg>(q, rep), err::InvalidValue);
  q = tiled(0x1000);
  q.kind = 1;  // im2col: corners missing, rank too small
  EXPECT_EQ(call<TensorMapEncodeMsg>(q, rep), err::InvalidValue);
  TensorMapReplaceReq r;
  r.address = 0x2000;  // a map of zeros is none the backend made
  EXPECT_EQ(call<TensorMapReplaceMsg>(r, rep), err::InvalidValue);
  ASSERT_EQ(call<TensorMapEncodeMsg>(tiled(0x1000), rep), 0) << msg_;  // the session goes on
}

TEST_F(DrvlibsSession, MemoryOperationsNameTheSessionsMemory) {
  MallocRep m;
  ASSERT_EQ(call<MallocMsg>(MallocReq{0, 256}, m), 0) << msg_;
  auto op = [&](uint32_t type, uint64_t address, uint32_t flags = 0) {
    send<StreamMemOpMsg>(StreamMemOpReq{0, 0, {MemOp{type, flags, address, 1}}});
    return async_error();
  };
  EXPECT_EQ(op(2, m.ptr), 0);                        // a write into the allocation
  EXPECT_EQ(op(1, m.ptr), 0);                        // a satisfied wait
  EXPECT_EQ(op(2, 0x1000), err::InvalidValue);       // not the session's memory
  EXPECT_EQ(op(2, m.ptr + 2), err::InvalidValue);    // unaligned
  EXPECT_EQ(op(5, m.ptr + 252), err::InvalidValue);  // 8 bytes past the end
  EXPECT_EQ(op(9, m.ptr), err::InvalidValue);        // unknown operation
  EXPECT_EQ(op(1, m.ptr, 7), err::InvalidValue);     // unknown comparison
  send<StreamMemOpMsg>(StreamMemOpReq{0, 0, {}});
  EXPECT_EQ(async_error(), err::InvalidValue);  // no operations
  send<StreamMemOpMsg>(StreamMemOpReq{0, 12345, {MemOp{2, 0, m.ptr, 1}}});
  EXPECT_EQ(async_error(), 400);  // no such stream
  EXPECT_EQ(op(2, m.ptr), 0);
}

TEST_F(DrvlibsSession, LinkStatesAreTheSessions) {
  Empty e;
  LinkCompleteRep done;
  LinkReadRep piece;
  EXPECT_EQ(call<LinkCreateMsg>(LinkReq{0, 0}, e), err::InvalidValue);  // id 0
  ASSERT_EQ(call<LinkCreateMsg>(LinkReq{0, 7}, e), 0) << msg_;
  EXPECT_EQ(call<LinkCreateMsg>(LinkReq{0, 7}, e), err::InvalidValue);           // taken
  EXPECT_EQ(call<LinkReadMsg>(LinkReadReq{0, 7, 0}, piece), err::InvalidValue);  // not linked
  std::vector<uint8_t> image(100000);
  for (size_t i = 0; i < image.size(); ++i) image[i] = static_cast<uint8_t>(i * 7);
  EXPECT_EQ(call<LinkAddDataMsg>(LinkAddDataReq{0, 8, 0, "x", 4}, e, "abcd", 4), 400);
  EXPECT_EQ(call<LinkAddDataMsg>(LinkAddDataReq{0, 7, 9, "x", 4}, e, "abcd", 4),
            err::InvalidValue);  // unknown input type
  ASSERT_EQ(call<LinkAddDataMsg>(LinkAddDataReq{0, 7, 0, "cubin", image.size()}, e, image.data(),
                                 image.size()),
            0)
      << msg_;
  ASSERT_EQ(call<LinkCompleteMsg>(LinkReq{0, 7}, done), 0) << msg_;
  ASSERT_EQ(done.size, image.size());
  std::vector<uint8_t> back;
  while (back.size() < done.size) {
    ASSERT_EQ(call<LinkReadMsg>(LinkReadReq{0, 7, back.size()}, piece), 0) << msg_;
    ASSERT_FALSE(piece.bytes.empty());
    back.insert(back.end(), piece.bytes.begin(), piece.bytes.end());
  }
  EXPECT_EQ(back, image);
  EXPECT_EQ(call<LinkReadMsg>(LinkReadReq{0, 7, done.size}, piece), err::InvalidValue);
  EXPECT_EQ(call<LinkReadMsg>(LinkReadReq{0, 7, ~0ull}, piece), err::InvalidValue);
  ASSERT_EQ(call<LinkDestroyMsg>(LinkReq{0, 7}, e), 0) << msg_;
  EXPECT_EQ(call<LinkDestroyMsg>(LinkReq{0, 7}, e), 400);
  // Two inputs: the test double cannot link them, and says so.
  ASSERT_EQ(call<LinkCreateMsg>(LinkReq{0, 9}, e), 0) << msg_;
  ASSERT_EQ(call<LinkAddDataMsg>(LinkAddDataReq{0, 9, 0, "a", 4}, e, "abcd", 4), 0) << msg_;
  ASSERT_EQ(call<LinkAddDataMsg>(LinkAddDataReq{0, 9, 0, "b", 4}, e, "efgh", 4), 0) << msg_;
  EXPECT_EQ(call<LinkCompleteMsg>(LinkReq{0, 9}, done), err::NotSupported);
  EXPECT_NE(msg_.find("test double"), std::string::npos) << msg_;
}

}  // namespace
