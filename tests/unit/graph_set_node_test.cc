// GraphSetNode on a server session (host backend, socket pair): new parameters of the same node
// kind replace a graph's or an executable graph's recorded request, and only that one's; a
// request of another kind, an unknown node or executable graph, or data that does not match the
// copy are refused naming what was wrong, and the session goes on.
#include <gtest/gtest.h>
#include <sys/socket.h>

#include <thread>

#include "backend/host/host_executor.h"
#include "proto/frame.h"
#include "server/session.h"
#include "transport/tcp/tcp.h"

using namespace rgpu;
using namespace rgpu::proto;

namespace {

class GraphSetNode : public ::testing::Test {
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
    FrameHeader h = read(body);
    EXPECT_TRUE(h.flags & kFlagReply);
    return decode_reply(body, rep, msg_);
  }
  int32_t set(uint64_t owner, bool exec, uint64_t node, MsgId type, std::vector<uint8_t> request,
              const void* payload = nullptr, uint64_t len = 0) {
    Empty e;
    return call<GraphSetNodeMsg>(
        GraphSetNodeReq{0, owner, exec, node, static_cast<uint16_t>(type), request, len}, e,
        payload, len);
  }
  // Launches executable graph `exec` on the legacy stream and reads `n` bytes at `ptr` back.
  std::vector<uint8_t> run_and_read(uint64_t exec, uint64_t ptr, size_t n) {
    send<GraphLaunchMsg>(GraphLaunchReq{0, exec, 0});
    send<MemcpyDtoHMsg>(MemcpyDtoHReq{0, ptr, n});
    std::vector<uint8_t> out(n), body;
    for (;;) {
      FrameHeader h = read(body);
      if (h.type == static_cast<uint16_t>(MsgId::AsyncData)) {
        auto piece = decode_message<AsyncDataMsg>(body.data(), body.size());
        EXPECT_LE(piece.offset + h.payload_len, n);
        client_->recv(out.data() + piece.offset, h.payload_len);
        continue;
      }
      EXPECT_TRUE(h.flags & kFlagReply) << "type " << h.type;
      Empty none;
      EXPECT_EQ(decode_reply(body, none, msg_), 0) << msg_;
      return out;
    }
  }

  std::unique_ptr<transport::Connection> client_, server_conn_;
  backend::HostLedger* ledger_ = nullptr;
  std::thread thread_;
  uint64_t id_ = 0;
  std::string msg_;
};

}  // namespace

TEST_F(GraphSetNode, ReplacesOneRequestOfTheSameKindAndRefusesTheRest) {
  MallocRep m;
  ASSERT_EQ(call<MallocMsg>(MallocReq{0, 64}, m), 0) << msg_;
  send<GraphCreateMsg>(GraphCreateReq{0, 100});
  GraphAddNodeRep node;
  ASSERT_EQ(call<GraphAddNodeMsg>(GraphAddNodeReq{0,
                                                  100,
                                                  {},
                                                  static_cast<uint16_t>(MsgId::Memset),
                                                  encode_message(MemsetReq{0, m.ptr, 1, 64, 0}),
                                                  0},
                                  node),
            0)
      << msg_;
  Empty e;
  ASSERT_EQ(call<GraphInstantiateMsg>(GraphInstantiateReq{0, 100, 200}, e), 0) << msg_;

  // The graph's node takes 9; the executable graph instantiated before keeps 1.
  ASSERT_EQ(
      set(100, false, node.node, MsgId::Memset, encode_message(MemsetReq{0, m.ptr, 9, 64, 0})), 0)
      << msg_;
  EXPECT_EQ(run_and_read(200, m.ptr, 64), std::vector<uint8_t>(64, 1));
  ASSERT_EQ(call<GraphInstantiateMsg>(GraphInstantiateReq{0, 100, 201}, e), 0) << msg_;
  EXPECT_EQ(run_and_read(201, m.ptr, 64), std::vector<uint8_t>(64, 9));
  // The executable graph's copy takes 5 (half the buffer); the graph keeps 9.
  ASSERT_EQ(set(200, true, node.node, MsgId::Memset, encode_message(MemsetReq{0, m.ptr, 5, 32, 0})),
            0)
      << msg_;
  std::vector<uint8_t> want(64, 9);
  std::fill(want.begin(), want.begin() + 32, 5);
  EXPECT_EQ(run_and_read(200, m.ptr, 64), want);

  // Refusals.
  EXPECT_EQ(set(100, false, node.node, MsgId::EventRecord, encode_message(EventRecordReq{0, 1, 0})),
            err::InvalidValue);
  EXPECT_NE(msg_.find("another kind of node"), std::string::npos) << msg_;
  EXPECT_EQ(set(100, false, 7, MsgId::Memset, encode_message(MemsetReq{0, m.ptr, 1, 64, 0})),
            err::InvalidValue);
  EXPECT_NE(msg_.find("no such node"), std::string::npos) << msg_;
  EXPECT_EQ(set(999, true, node.node, MsgId::Memset, encode_message(MemsetReq{0, m.ptr, 1, 64, 0})),
            err::InvalidValue);
  EXPECT_NE(msg_.find("no such executable graph"), std::string::npos) << msg_;
  EXPECT_EQ(
      set(998, false, node.node, MsgId::Memset, encode_message(MemsetReq{0, m.ptr, 1, 64, 0})),
      err::InvalidValue);
  EXPECT_NE(msg_.find("no such graph"), std::string::npos) << msg_;
  const char bytes[8] = {};
  EXPECT_EQ(set(100, false, node.node, MsgId::Memset, encode_message(MemsetReq{0, m.ptr, 1, 64, 0}),
                bytes, sizeof bytes),
            err::InvalidValue);
  EXPECT_NE(msg_.find("only a host-to-device copy"), std::string::npos) << msg_;
  EXPECT_EQ(
      set(100, false, node.node, MsgId::MemcpyDtoH, encode_message(MemcpyDtoHReq{0, m.ptr, 8})),
      err::InvalidValue);
  EXPECT_NE(msg_.find("cannot be a graph node"), std::string::npos) << msg_;

  // The session goes on, the graph as it was.
  EXPECT_EQ(run_and_read(201, m.ptr, 64), std::vector<uint8_t>(64, 9));
}
