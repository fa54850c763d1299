// A server session driven directly over a socket pair, with the host backend: handshake rules,
// authentication, requests with payloads, asynchronous failures, malformed input and cleanup.
#include "server/session.h"

#include <gtest/gtest.h>
#include <sys/socket.h>

#include <algorithm>
#include <thread>

#include "backend/host/host_executor.h"
#include "proto/auth.h"
#include "proto/frame.h"
#include "transport/tcp/tcp.h"

using namespace rgpu;
using namespace rgpu::proto;

namespace {

class SessionTest : public ::testing::Test {
 protected:
  void start(std::optional<std::string> token = std::nullopt) {
    int fds[2];
    ASSERT_EQ(socketpair(AF_UNIX, SOCK_STREAM, 0, fds), 0);
    client_ = transport::tcp_adopt(fds[0], "test-client");
    server_conn_ = transport::tcp_adopt(fds[1], "test-server");
    ledger_ = backend::HostLedger::create(64 << 20);
    thread_ = std::thread([this, token] {
      auto exec = backend::make_host_executor({ledger_});
      server::Session s(*server_conn_, *exec, server::SessionConfig{token, "test"});
      s.run();
      server_conn_->shutdown();
    });
  }
  void TearDown() override {
    if (client_) client_->shutdown();
    if (thread_.joinable()) thread_.join();
  }

  void send(uint16_t type, const std::vector<uint8_t>& body, uint64_t id,
            const void* payload = nullptr, uint64_t payload_len = 0,
            uint64_t claimed = UINT64_MAX, uint16_t flags = 0) {
    FrameHeader h{type, flags, static_cast<uint32_t>(body.size()), id,
                  claimed == UINT64_MAX ? payload_len : claimed};
    uint8_t raw[kHeaderSize];
    encode_header(h, raw);
    iovec v[3] = {{raw, sizeof raw},
                  {const_cast<uint8_t*>(body.data()), body.size()},
                  {const_cast<void*>(payload), payload_len}};
    client_->send_all(v, 3);
  }
  template <class M>
  void send_req(const typename M::Req& req, uint64_t id, const void* payload = nullptr,
                uint64_t len = 0) {
    send(static_cast<uint16_t>(M::id), encode_message(req), id, payload, len);
  }
  FrameHeader read(std::vector<uint8_t>& body) {
    uint8_t raw[kHeaderSize];
    client_->recv(raw, sizeof raw);
    FrameHeader h = decode_header(raw);
    body.resize(h.body_len);
    if (h.body_len) client_->recv(body.data(), body.size());
    return h;
  }
  template <class Rep>
  int32_t reply(Rep& rep, std::string& msg) {
    std::vector<uint8_t> body;
    FrameHeader h = read(body);
    EXPECT_TRUE(h.flags & kFlagReply);
    return decode_reply(body, rep, msg);
  }
  void handshake() {
    send_req<HelloMsg>(HelloReq{}, 1);
    HelloRep rep;
    std::string msg;
    ASSERT_EQ(reply(rep, msg), 0) << msg;
    EXPECT_EQ(rep.gpu_count, 1u);
    EXPECT_EQ(rep.backend, "host");
  }
  bool closed_by_server() {
    char c;
    try {
      return !client_->recv_or_eof(&c, 1);
    } catch (const transport::TransportError&) {
      return true;
    }
  }

  std::unique_ptr<transport::Connection> client_, server_conn_;
  backend::HostLedger* ledger_ = nullptr;
  std::thread thread_;
};

}  // namespace

TEST_F(SessionTest, WrongVersionIsRefusedNamingBothVersions) {
  start();
  HelloReq h;
  h.version = 99;
  send_req<HelloMsg>(h, 1);
  HelloRep rep;
  std::string msg;
  EXPECT_EQ(reply(rep, msg), err::InsufficientDriver);
  EXPECT_NE(msg.find("version 99"), std::string::npos) << msg;
  EXPECT_NE(msg.find("version " + std::to_string(kProtocolVersion)), std::string::npos) << msg;
  EXPECT_TRUE(closed_by_server());
}

TEST_F(SessionTest, GarbageClosesTheConnection) {
  start();
  std::vector<uint8_t> junk(100, 0xee);
  client_->send(junk.data(), junk.size());
  EXPECT_TRUE(closed_by_server());
}

TEST_F(SessionTest, FirstMessageMustBeHello) {
  start();
  send_req<PingMsg>(PingReq{}, 1);
  EXPECT_TRUE(closed_by_server());
}

TEST_F(SessionTest, TokenRequiredAndChecked) {
  start(std::string("s3cret"));
  send_req<HelloMsg>(HelloReq{}, 1);
  HelloRep rep;
  std::string msg;
  ASSERT_EQ(reply(rep, msg), 0);
  ASSERT_TRUE(rep.auth_required);
  AuthReq bad{auth_mac("wrong", rep.challenge)};
  send_req<AuthMsg>(bad, 2);
  Empty e;
  EXPECT_EQ(reply(e, msg), err::NotPermitted);
  EXPECT_NE(msg.find("authentication failed"), std::string::npos);
  EXPECT_TRUE(closed_by_server());
}

TEST_F(SessionTest, TokenAccepted) {
  start(std::string("s3cret"));
  send_req<HelloMsg>(HelloReq{}, 1);
  HelloRep rep;
  std::string msg;
  ASSERT_EQ(reply(rep, msg), 0);
  send_req<AuthMsg>(AuthReq{auth_mac("s3cret", rep.challenge)}, 2);
  Empty e;
  EXPECT_EQ(reply(e, msg), 0) << msg;
  send_req<PingMsg>(PingReq{}, 3);
  EXPECT_EQ(reply(e, msg), 0);
}

TEST_F(SessionTest, CopiesRoundTripAndErrorsKeepTheSessionUsable) {
  start();
  handshake();
  MallocRep m;
  std::string msg;
  send_req<MallocMsg>(MallocReq{0, 100000}, 2);
  ASSERT_EQ(reply(m, msg), 0);
  EXPECT_GT(ledger_->used(), 0u);

  std::vector<uint8_t> data(100000);
  for (size_t i = 0; i < data.size(); ++i) data[i] = static_cast<uint8_t>(i * 13);
  send_req<MemcpyHtoDMsg>(MemcpyHtoDReq{0, m.ptr, data.size()}, 3, data.data(), data.size());
  Empty e;
  ASSERT_EQ(reply(e, msg), 0) << msg;

  // A copy to a bad address: the payload is drained, the error returned, the session goes on.
  send_req<MemcpyHtoDMsg>(MemcpyHtoDReq{0, m.ptr + 99999, 2}, 4, data.data(), 2);
  EXPECT_EQ(reply(e, msg), err::InvalidValue);

  // Device-to-host data comes as AsyncData frames (offsets into the destination), then the reply.
  send_req<MemcpyDtoHMsg>(MemcpyDtoHReq{0, m.ptr, data.size()}, 5);
  std::vector<uint8_t> body;
  std::vector<uint8_t> back(data.size());
  FrameHeader h;
  for (bool last = false; !last;) {
    h = read(body);
    ASSERT_EQ(h.type, static_cast<uint16_t>(MsgId::AsyncData));
    ASSERT_EQ(h.request_id, 5u);
    AsyncDataMsg piece = decode_message<AsyncDataMsg>(body.data(), body.size());
    ASSERT_LE(piece.offset + h.payload_len, back.size());
    client_->recv(back.data() + piece.offset, h.payload_len);
    last = piece.last;
  }
  h = read(body);
  EXPECT_TRUE(h.flags & kFlagReply);
  EXPECT_EQ(h.payload_len, 0u);
  Empty none;
  EXPECT_EQ(decode_reply(body, none, msg), 0) << msg;
  EXPECT_EQ(back, data);

  // An asynchronous failure comes back as AsyncError naming the request.
  send_req<FreeMsg>(FreeReq{0, 12345}, 6);
  h = read(body);
  EXPECT_EQ(h.type, static_cast<uint16_t>(MsgId::AsyncError));
  AsyncErrorMsg a = decode_message<AsyncErrorMsg>(body.data(), body.size());
  EXPECT_EQ(a.request_id, 6u);
  EXPECT_EQ(a.error, err::InvalidValue);

  // Bad device index.
  send_req<MallocMsg>(MallocReq{7, 16}, 7);
  EXPECT_EQ(reply(m, msg), err::InvalidDevice);

  // Over capacity.
  send_req<MallocMsg>(MallocReq{0, 1ull << 30}, 8);
  EXPECT_EQ(reply(m, msg), err::MemoryAllocation);

  send_req<PingMsg>(PingReq{}, 9);
  EXPECT_EQ(reply(e, msg), 0);
}

TEST_F(SessionTest, AModuleMustMatchItsHash) {
  start();
  handshake();
  std::vector<uint8_t> image(100, 0x42);
  ModuleLoadReq q;
  q.hash = sha256("something else", 14);
  q.image_size = image.size();
  send_req<ModuleLoadMsg>(q, 2, image.data(), image.size());
  ModuleRep rep;
  std::string msg;
  EXPECT_EQ(reply(rep, msg), err::InvalidValue);
  EXPECT_NE(msg.find("does not match its hash"), std::string::npos) << msg;
  // Unknown hashes are not found; garbage with the right hash is refused as an image.
  send_req<ModuleLookupMsg>(ModuleLookupReq{0, q.hash, {}, {}}, 3);
  EXPECT_EQ(reply(rep, msg), 500);
  q.hash = sha256(image.data(), image.size());
  send_req<ModuleLoadMsg>(q, 4, image.data(), image.size());
  EXPECT_EQ(reply(rep, msg), 200);      // cudaErrorInvalidKernelImage
  send_req<LaunchMsg>(LaunchReq{}, 5);  // no module: an asynchronous error
  std::vector<uint8_t> body;
  FrameHeader h = read(body);
  EXPECT_EQ(h.type, static_cast<uint16_t>(MsgId::AsyncError));
}

TEST_F(SessionTest, PayloadLengthMustMatchTheFields) {
  start();
  handshake();
  std::vector<uint8_t> data(10);
  send(static_cast<uint16_t>(MsgId::MemcpyHtoD), encode_message(MemcpyHtoDReq{0, 0, 100}), 2,
       data.data(), data.size());
  EXPECT_TRUE(closed_by_server());
}

TEST_F(SessionTest, TheHandshakeListsTheMessagesTheServerKnows) {
  start();
  send_req<HelloMsg>(HelloReq{}, 1);
  HelloRep rep;
  std::string msg;
  ASSERT_EQ(reply(rep, msg), 0) << msg;
  EXPECT_EQ(rep.known, known_ids());
  for (uint16_t id : {0x0200, 0x0302, 0x0009}) {  // Malloc, Launch, PayloadDone
    EXPECT_NE(std::find(rep.known.begin(), rep.known.end(), id), rep.known.end()) << id;
  }
}

// A newer client's request this server does not know: answered cudaErrorNotSupported (a reply when
// the client waits, an AsyncError when not), its payload skipped, and the connection lives on.
TEST_F(SessionTest, AnUnknownRequestIsAnsweredNotSupportedAndTheConnectionLivesOn) {
  start();
  handshake();
  std::vector<char> data(300000, 'x');  // more than a socket buffer: it must be skipped
  send(0x7777, {1, 2, 3}, 2, data.data(), data.size(), UINT64_MAX, kFlagSync);
  std::vector<uint8_t> body;
  FrameHeader h = read(body);
  EXPECT_EQ(h.type, 0x7777);
  EXPECT_TRUE(h.flags & kFlagReply);
  EXPECT_EQ(h.request_id, 2u);
  Empty none;
  std::string msg;
  EXPECT_EQ(decode_reply(body, none, msg), err::NotSupported);
  EXPECT_NE(msg.find("0x7777"), std::string::npos) << msg;

  send(0x7778, {}, 3);  // asynchronous: no reply, an AsyncError
  h = read(body);
  ASSERT_EQ(h.type, static_cast<uint16_t>(MsgId::AsyncError));
  AsyncErrorMsg ae = decode_message<AsyncErrorMsg>(body.data(), body.size());
  EXPECT_EQ(ae.request_id, 3u);
  EXPECT_EQ(ae.error, err::NotSupported);

  send_req<PingMsg>(PingReq{}, 4);
  PingRep pong;
  EXPECT_EQ(reply(pong, msg), 0) << msg;
}

TEST_F(SessionTest, EndOfSessionReleasesEverything) {
  start();
  handshake();
  MallocRep m;
  std::string msg;
  send_req<MallocMsg>(MallocReq{0, 10 << 20}, 2);
  ASSERT_EQ(reply(m, msg), 0);
  EXPECT_GE(ledger_->used(), 10u << 20);
  client_->shutdown();
  thread_.join();
  EXPECT_EQ(ledger_->used(), 0u);
}
