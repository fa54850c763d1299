// The channel layer: the handshake's two halves against each other and against peers of other
// versions (what each side knows, fields a newer peer appended), skipping frames nobody knows, and
// a newer client on an older server: the call the server lacks is refused on the client, the
// others work.
#include "channel/channel.h"

#include <gtest/gtest.h>
#include <sys/socket.h>

#include <cstdlib>
#include <thread>

#include "channel/handshake.h"
#include "client/server_link.h"
#include "common/cuda_errors.h"
#include "transport/tcp/tcp.h"

using namespace rgpu;
using namespace rgpu::proto;

namespace {

struct Pair {
  std::unique_ptr<transport::Connection> a, b;
  Pair() {
    int fds[2];
    EXPECT_EQ(socketpair(AF_UNIX, SOCK_STREAM, 0, fds), 0);
    a = transport::tcp_adopt(fds[0], "requester");
    b = transport::tcp_adopt(fds[1], "server");
    a->set_recv_timeout(5);
    b->set_recv_timeout(5);
  }
};

channel::AcceptPolicy policy(std::optional<std::string> token = std::nullopt) {
  channel::AcceptPolicy p;
  p.token = std::move(token);
  p.reply.gpu_count = 2;
  p.reply.backend = "host";
  p.reply.server_info = "test server";
  return p;
}

}  // namespace

TEST(Channel, BothHalvesAgreeAndLearnWhatThePeerKnows) {
  Pair p;
  channel::Channel req(*p.a), srv(*p.b);
  HelloReq seen;
  bool accepted = false;
  std::thread server([&] { accepted = channel::accept_handshake(srv, policy(), &seen); });
  HelloReq hello;
  hello.client_info = "unit test";
  hello.timeout_ms = 1234;
  channel::HandshakeResult r = channel::request_handshake(req, hello, std::nullopt);
  server.join();
  ASSERT_EQ(r.error, 0) << r.message;
  EXPECT_TRUE(accepted);
  EXPECT_EQ(r.hello.gpu_count, 2u);
  EXPECT_EQ(r.hello.server_info, "test server");
  EXPECT_EQ(seen.timeout_ms, 1234u);
  EXPECT_EQ(seen.client_info, "unit test");
  EXPECT_EQ(seen.known, known_ids());
  EXPECT_TRUE(req.peer_knows(static_cast<uint16_t>(MsgId::Malloc)));
  EXPECT_TRUE(srv.peer_knows(static_cast<uint16_t>(MsgId::CallbackDone)));
  EXPECT_FALSE(req.peer_knows(0x7777));
}

TEST(Channel, TheTokenIsCheckedBothWays) {
  for (const char* given : {"right", "wrong", ""}) {
    Pair p;
    channel::Channel req(*p.a), srv(*p.b);
    bool accepted = true;
    std::thread server([&] {
      try {
        accepted = channel::accept_handshake(srv, policy(std::string("right")), nullptr);
      } catch (const std::exception&) {
        accepted = false;  // the requester left without Auth
      }
    });
    std::optional<std::string> token;
    if (*given) token = given;
    channel::HandshakeResult r = channel::request_handshake(req, HelloReq{}, token);
    p.a->shutdown();
    server.join();
    if (std::string(given) == "right") {
      EXPECT_EQ(r.error, 0) << r.message;
      EXPECT_TRUE(accepted);
    } else {
      EXPECT_EQ(r.error, err::NotPermitted) << given;
      EXPECT_NE(r.message.find("RGPU_TOKEN"), std::string::npos) << r.message;
      EXPECT_FALSE(accepted);
    }
  }
}

// A newer requester appends Hello fields this server does not know: they are ignored.
TEST(Channel, HelloFieldsANewerPeerAppendedAreIgnored) {
  Pair p;
  channel::Channel req(*p.a), srv(*p.b);
  HelloReq seen;
  bool accepted = false;
  std::thread server([&] { accepted = channel::accept_handshake(srv, policy(), &seen); });
  HelloReq hello;
  hello.timeout_ms = 77;
  hello.known = known_ids();
  std::vector<uint8_t> body = encode_message(hello);
  for (uint8_t extra : {1, 2, 3, 4, 5, 6, 7}) body.push_back(extra);  // a future field
  req.send(static_cast<uint16_t>(MsgId::Hello), kFlagSync, 1, body);
  FrameHeader h;
  std::vector<uint8_t> rb;
  ASSERT_TRUE(req.read_frame(h, rb, channel::Channel::Wait::Timed));
  server.join();
  HelloRep rep;
  std::string msg;
  EXPECT_EQ(decode_reply(rb, rep, msg), 0) << msg;
  EXPECT_TRUE(accepted);
  EXPECT_EQ(seen.timeout_ms, 77u);
}

TEST(Channel, AVersionOutsideTheRangeIsRefusedNamingBoth) {
  Pair p;
  channel::Channel req(*p.a), srv(*p.b);
  std::thread server([&] { channel::accept_handshake(srv, policy(), nullptr); });
  HelloReq hello;
  hello.version = 3;  // request_handshake always sends ours: hand-made here
  req.send(static_cast<uint16_t>(MsgId::Hello), kFlagSync, 1, encode_message(hello));
  FrameHeader h;
  std::vector<uint8_t> rb;
  ASSERT_TRUE(req.read_frame(h, rb, channel::Channel::Wait::Timed));
  server.join();
  HelloRep rep;
  std::string msg;
  EXPECT_EQ(decode_reply(rb, rep, msg), err::InsufficientDriver);
  EXPECT_NE(msg.find("version 3"), std::string::npos) << msg;
  EXPECT_NE(msg.find("version " + std::to_string(kProtocolVersion)), std::string::npos) << msg;
}

TEST(Channel, AFrameNobodyKnowsIsSkippedWhole) {
  Pair p;
  channel::Channel a(*p.a), b(*p.b);
  std::vector<char> junk(200000, 'j');
  iovec v{junk.data(), junk.size()};
  std::thread sender([&] {
    a.send(0x6666, kFlagTrailer, 9, {1, 2}, &v, 1, -5);
    a.send(static_cast<uint16_t>(MsgId::Ping), kFlagSync, 10, {});
  });
  FrameHeader h;
  std::vector<uint8_t> body;
  ASSERT_TRUE(b.read_frame(h, body, channel::Channel::Wait::Timed));
  EXPECT_EQ(h.type, 0x6666);
  EXPECT_EQ(body.size(), 2u);
  b.skip_rest(h);
  ASSERT_TRUE(b.read_frame(h, body, channel::Channel::Wait::Timed));
  EXPECT_EQ(h.type, static_cast<uint16_t>(MsgId::Ping));
  EXPECT_EQ(h.request_id, 10u);
  sender.join();
}

// A client library newer than its server: the server's Hello lists what it knows; a request it
// lacks is refused by the client (cudaErrorNotSupported, nothing sent), and everything else works.
TEST(Channel, ANewerClientWorksWithAnOlderServerWhereItCan) {
  auto listener = transport::tcp_listen("127.0.0.1", 0);
  std::atomic<int> mallocs_seen{0};
  std::thread server([&] {
    auto conn = listener->accept();
    ASSERT_TRUE(conn);
    conn->set_recv_timeout(10);
    channel::Channel ch(*conn);
    FrameHeader h;
    std::vector<uint8_t> body;
    ASSERT_TRUE(ch.read_frame(h, body, channel::Channel::Wait::Timed));
    ASSERT_EQ(h.type, static_cast<uint16_t>(MsgId::Hello));
    HelloRep rep;
    rep.gpu_count = 1;
    rep.backend = "host";
    rep.server_info = "an older rgpud";
    rep.known = {static_cast<uint16_t>(MsgId::Hello), static_cast<uint16_t>(MsgId::Ping),
                 static_cast<uint16_t>(MsgId::AsyncError)};  // no Malloc
    ch.send(h.type, kFlagReply, h.request_id, encode_ok_reply(rep));
    while (ch.read_frame(h, body, channel::Channel::Wait::Idle)) {
      if (h.type == static_cast<uint16_t>(MsgId::Malloc)) ++mallocs_seen;
      if (h.flags & kFlagSync) ch.send(h.type, kFlagReply, h.request_id, encode_ok_reply(Empty{}));
    }
  });
  setenv("RGPU_TRANSPORT", "tcp", 1);
  {
    client::ServerLink link("127.0.0.1", listener->port(), std::nullopt, 5);
    ASSERT_EQ(link.ensure_connected(), err::Success);
    MallocRep m;
    EXPECT_EQ(link.call<MallocMsg>(MallocReq{0, 4096}, &m), err::NotSupported);
    EXPECT_EQ(link.call<PingMsg>(PingReq{}), err::Success);
    EXPECT_EQ(link.call<MallocMsg>(MallocReq{0, 4096}, &m), err::NotSupported);
  }
  unsetenv("RGPU_TRANSPORT");
  server.join();
  EXPECT_EQ(mallocs_seen.load(), 0);
}
