// Server-to-server copies with many tenants (docs/architecture.md, "Security of server-to-server
// copies"): a client, even one that holds the clients' token, cannot make its session connect to
// an endpoint no rgpud of the cluster vouched for itself (a counting listener sees no connection,
// and the copy's error says why), and an rgpud's peer link never answers a token challenge, nor
// does anything it sends authenticate a client.  A genuine ticket's copy still goes through.
#include <gtest/gtest.h>
#include <poll.h>
#include <sys/random.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <fstream>
#include <optional>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include "channel/channel.h"
#include "channel/handshake.h"
#include "proto/auth.h"
#include "proto/frame.h"
#include "proto/peer_auth.h"
#include "tests/integration/harness.h"
#include "transport/tcp/tcp.h"

using namespace rgpu::test;
using namespace rgpu::proto;
namespace channel = rgpu::channel;
namespace transport = rgpu::transport;

namespace {

constexpr uint16_t kRetiredPeerCopy = 0x1108;  // PeerCopy before vouched tickets
constexpr char kToken[] = "the-tenants-token";

// A token file (mode 0600) for the rgpuds of a test; removed with it.
struct TokenFile {
  std::string path;
  TokenFile() {
    char tmpl[] = "/tmp/rgpu-tenant-token-XXXXXX";
    int fd = mkstemp(tmpl);
    EXPECT_GE(fd, 0);
    EXPECT_EQ(write(fd, kToken, sizeof kToken - 1), static_cast<ssize_t>(sizeof kToken - 1));
    close(fd);
    path = tmpl;
  }
  ~TokenFile() { unlink(path.c_str()); }
};

PeerKey the_peer_key() {
  std::string error;
  auto secret = read_token_file(peer_key_file(), error);
  EXPECT_TRUE(secret) << error;
  return derive_peer_key(secret ? *secret : "");
}

// As server/peer_ipc.cc names this machine (boot id and network namespace).
std::string machine_id() {
  std::ifstream f("/proc/sys/kernel/random/boot_id");
  std::string id;
  std::getline(f, id);
  char ns[128] = {};
  ssize_t n = readlink("/proc/self/ns/net", ns, sizeof ns - 1);
  return id + " " + std::string(ns, static_cast<size_t>(n > 0 ? n : 0));
}

uint64_t wall_ms() {
  return static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::milliseconds>(
                                   std::chrono::system_clock::now().time_since_epoch())
                                   .count());
}

template <size_t N>
std::array<uint8_t, N> random_array() {
  std::array<uint8_t, N> a;
  EXPECT_EQ(getrandom(a.data(), a.size(), 0), static_cast<ssize_t>(N));
  return a;
}

// A client of rgpud spoken to directly (with the token).  Asynchronous errors that arrive before
// a reply are collected in `async_errors`.
struct Client {
  std::unique_ptr<transport::Connection> conn;
  std::unique_ptr<channel::Channel> ch;
  std::vector<AsyncErrorMsg> async_errors;
  explicit Client(uint16_t port) {
    conn = transport::tcp_connect("127.0.0.1", port, 10);
    conn->set_recv_timeout(30);
    ch = std::make_unique<channel::Channel>(*conn);
    HelloReq hello;
    auto r = channel::request_handshake(*ch, hello, std::string(kToken));
    EXPECT_EQ(r.error, 0) << r.message;
  }
  void post(uint16_t type, const std::vector<uint8_t>& body, const void* payload = nullptr,
            size_t n = 0) {
    iovec v{const_cast<void*>(payload), n};
    ch->send(type, 0, ch->next_request_id(), body, n ? &v : nullptr, n ? 1 : 0);
  }
  template <class Req, class Rep>
  int32_t call(MsgId type, const Req& q, Rep& rep, const void* payload = nullptr, size_t n = 0,
               std::vector<uint8_t>* data = nullptr) {
    const uint64_t id = ch->next_request_id();
    iovec v{const_cast<void*>(payload), n};
    ch->send(static_cast<uint16_t>(type), kFlagSync, id, encode_message(q), n ? &v : nullptr,
             n ? 1 : 0);
    FrameHeader h;
    std::vector<uint8_t> body;
    for (;;) {
      ch->read_frame(h, body, channel::Channel::Wait::Timed);
      if (h.flags & kFlagReply) break;
      if (h.type == static_cast<uint16_t>(MsgId::AsyncError)) {
        async_errors.push_back(decode_message<AsyncErrorMsg>(body.data(), body.size()));
      } else if (h.type == static_cast<uint16_t>(MsgId::AsyncData) && data) {
        auto d = decode_message<AsyncDataMsg>(body.data(), body.size());
        data->resize(std::max<size_t>(data->size(), d.offset + h.payload_len));
        iovec in{data->data() + d.offset, h.payload_len};
        ch->read_payload(&in, 1);
        continue;
      }
      ch->skip_rest(h);
    }
    EXPECT_EQ(h.request_id, id);
    std::string message;
    return decode_reply(body, rep, message);
  }
  int32_t synchronize() {
    Empty e;
    return call(MsgId::DeviceSynchronize, DeviceReq{0}, e);
  }
  uint64_t alloc(uint64_t size) {
    MallocRep m;
    EXPECT_EQ(call(MsgId::Malloc, MallocReq{0, size, 0}, m), 0);
    return m.ptr;
  }
};

// A plain TCP listener on loopback that counts the connections it is offered.
struct CountingListener {
  std::unique_ptr<transport::Listener> l = transport::tcp_listen("127.0.0.1", 0);
  std::atomic<int> accepted{0};
  std::atomic<bool> stop{false};
  std::thread t{[this] {
    while (!stop) {
      pollfd p{l->fd(), POLLIN, 0};
      if (poll(&p, 1, 50) == 1 && l->accept()) ++accepted;  // closed at once
    }
  }};
  ~CountingListener() {
    stop = true;
    t.join();
  }
  std::string endpoint() const { return "127.0.0.1:" + std::to_string(l->port()); }
};

PeerCopyReq push_copy(uint64_t local, uint64_t remote, const std::string& name,
                      const PeerVoucher& ticket, uint64_t fence = 0) {
  PeerCopyReq q;
  q.local = local;
  q.local_pitch = 4096;
  q.remote = remote;
  q.remote_pitch = 4096;
  q.width = 4096;
  q.height = 1;
  q.push = 1;
  q.endpoint = name;
  q.remote_name = name;
  q.ticket = ticket;
  q.fence = fence;
  return q;
}

// The copy's asynchronous error (the client's next synchronization returns it): its message, ""
// for none.  `code`: the error it must be (cudaErrorNotPermitted: refused before anything was
// connected; cudaErrorDevicesUnavailable: the link failed).
std::string copy_error(Client& c, int32_t code = 800) {
  c.async_errors.clear();
  EXPECT_EQ(c.synchronize(), 0);
  for (const auto& e : c.async_errors)
    if (e.msg_type == static_cast<uint16_t>(MsgId::PeerCopy)) {
      EXPECT_EQ(e.error, code) << e.message;
      return e.message;
    }
  return "";
}

// The old PeerCopy: the endpoint as the client wrote it, connected to as it was.
struct RetiredPeerCopyReq {
  uint32_t device = 0, remote_device = 0;
  uint64_t local = 0, local_pitch = 0, remote = 0, remote_pitch = 0, width = 0, height = 0;
  uint32_t push = 0;
  uint64_t stream = 0;
  std::string endpoint, remote_name;
  PeerTicketId ticket{};
  PeerSecret secret{};
  uint64_t fence = 0;
  std::array<uint8_t, 32> tls_pin{};
  RGPU_FIELDS(device, remote_device, local, local_pitch, remote, remote_pitch, width, height, push,
              stream, endpoint, remote_name, ticket, secret, fence, tls_pin)
};

TEST(TenantPeer, AnEndpointNoRgpudVouchedForIsRefusedWithoutAConnection) {
  TokenFile token;
  Daemon a({"--token-file", token.path}), b({"--token-file", token.path});
  CountingListener probe;
  Client ca(a.port()), cb(b.port());
  const uint64_t src = ca.alloc(4096), dst = cb.alloc(4096);
  PeerTicketRep genuine;
  ASSERT_EQ(cb.call(MsgId::PeerTicket, Empty{}, genuine), 0);
  ASSERT_EQ(genuine.ticket.endpoint, b.servers());

  // A ticket made up by the client, naming the listener.
  PeerVoucher forged;
  forged.id = random_array<16>();
  forged.secret = random_array<32>();
  forged.endpoint = probe.endpoint();
  forged.machine = machine_id();
  forged.not_after_ms = wall_ms() + 60000;
  ca.post(static_cast<uint16_t>(MsgId::PeerCopy),
          encode_message(push_copy(src, dst, probe.endpoint(), forged)));
  std::string why = copy_error(ca);
  EXPECT_NE(why.find("nothing was connected"), std::string::npos) << why;
  EXPECT_NE(why.find("not vouched for"), std::string::npos) << why;
  // The same signed with what a tenant holds, the token.
  forged.mac = peer_voucher_mac(derive_peer_key(kToken), forged);
  ca.post(static_cast<uint16_t>(MsgId::PeerCopy),
          encode_message(push_copy(src, dst, probe.endpoint(), forged)));
  why = copy_error(ca);
  EXPECT_NE(why.find("not vouched for"), std::string::npos) << why;
  // b's genuine ticket with its endpoint changed to the listener's.
  PeerVoucher altered = genuine.ticket;
  altered.endpoint = probe.endpoint();
  ca.post(static_cast<uint16_t>(MsgId::PeerCopy),
          encode_message(push_copy(src, dst, b.servers(), altered)));
  why = copy_error(ca);
  EXPECT_NE(why.find("not vouched for"), std::string::npos) << why;
  // Endpoints a vouching rgpud would never state (signed here with the peer key, as a broken
  // rgpud might): a name to resolve, a wildcard, and a loopback address of another machine.
  const PeerKey key = the_peer_key();
  const std::string port = std::to_string(probe.l->port());
  const std::vector<std::tuple<std::string, std::string, std::string>> odd_ones = {
      {"localhost:" + port, machine_id(), "not a numeric"},
      {"0.0.0.0:" + port, machine_id(), "no address an rgpud"},
      {probe.endpoint(), "another machine", "another machine"}};
  for (const auto& [endpoint, machine, reason] : odd_ones) {
    PeerVoucher odd = forged;
    odd.endpoint = endpoint;
    odd.machine = machine;
    odd.mac = peer_voucher_mac(key, odd);
    ca.post(static_cast<uint16_t>(MsgId::PeerCopy),
            encode_message(push_copy(src, dst, endpoint, odd)));
    why = copy_error(ca);
    EXPECT_NE(why.find(reason), std::string::npos) << endpoint << ": " << why;
  }
  // The old request, which named the endpoint alone: not served.
  RetiredPeerCopyReq old;
  old.local = src;
  old.local_pitch = old.width = 4096;
  old.height = 1;
  old.push = 1;
  old.endpoint = old.remote_name = probe.endpoint();
  old.ticket = forged.id;
  ca.post(kRetiredPeerCopy, encode_message(old));
  ca.async_errors.clear();
  EXPECT_EQ(ca.synchronize(), 0);
  ASSERT_EQ(ca.async_errors.size(), 1u);
  EXPECT_EQ(ca.async_errors[0].error, 801);  // cudaErrorNotSupported

  // b's ticket as b issued it: the copy goes to b, and nowhere else.
  std::vector<uint8_t> bytes(4096);
  for (size_t i = 0; i < bytes.size(); ++i) bytes[i] = static_cast<uint8_t>(i * 13 + 1);
  Empty ok;
  ASSERT_EQ(ca.call(MsgId::MemcpyHtoD, MemcpyHtoDReq{0, src, 4096}, ok, bytes.data(), 4096), 0);
  cb.post(static_cast<uint16_t>(MsgId::PeerFence), encode_message(PeerFenceReq{0, 1}));
  ca.post(static_cast<uint16_t>(MsgId::PeerCopy),
          encode_message(push_copy(src, dst, b.servers(), genuine.ticket, 1)));
  EXPECT_EQ(copy_error(ca), "");
  std::vector<uint8_t> got;
  ASSERT_EQ(cb.call(MsgId::MemcpyDtoH, MemcpyDtoHReq{0, dst, 4096}, ok, nullptr, 0, &got), 0);
  EXPECT_EQ(got, bytes);

  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  EXPECT_EQ(probe.accepted, 0) << "a session connected to an endpoint nobody vouched for";
  EXPECT_TRUE(a.alive() && b.alive());
}

// The other end of a's peer link is the test's: it holds the peer key (the strongest rogue
// peer there is) and relays challenges of a's own client handshake.  a answers none with its
// token, and what it does send (its PeerProve) authenticates nobody as a client.
TEST(TenantPeer, APeerLinkIsNoTokenOracle) {
  TokenFile token;
  Daemon a({"--token-file", token.path});
  const PeerKey key = the_peer_key();
  auto fake = transport::tcp_listen("127.0.0.1", 0);
  const std::string endpoint = "127.0.0.1:" + std::to_string(fake->port());
  Client ca(a.port());
  const uint64_t src = ca.alloc(4096);
  auto voucher = [&] {
    PeerVoucher v;
    v.id = random_array<16>();
    v.secret = random_array<32>();
    v.endpoint = endpoint;
    v.machine = machine_id();
    v.not_after_ms = wall_ms() + 60000;
    v.mac = peer_voucher_mac(key, v);
    return v;
  };
  // a's link to the fake peer: its Hello.
  auto link = [&](std::unique_ptr<channel::Channel>& ch) {
    pollfd p{fake->fd(), POLLIN, 0};
    if (poll(&p, 1, 10000) != 1)
      return std::make_pair(std::unique_ptr<transport::Connection>(), uint64_t{0});
    auto conn = fake->accept();
    conn->set_recv_timeout(10);
    ch = std::make_unique<channel::Channel>(*conn);
    FrameHeader h;
    std::vector<uint8_t> body;
    EXPECT_TRUE(ch->read_frame(h, body, channel::Channel::Wait::Timed));
    EXPECT_EQ(h.type, static_cast<uint16_t>(MsgId::Hello));
    auto hello = decode_message_prefix<HelloReq>(body.data(), body.size());
    EXPECT_EQ(hello.purpose, static_cast<uint32_t>(LinkPurpose::PeerLink));
    return std::make_pair(std::move(conn), h.request_id);
  };
  // A client handshake with a: the challenge it must answer.
  auto victim = [&](std::unique_ptr<transport::Connection>& conn,
                    std::unique_ptr<channel::Channel>& ch) {
    conn = transport::tcp_connect("127.0.0.1", a.port(), 10);
    conn->set_recv_timeout(10);
    ch = std::make_unique<channel::Channel>(*conn);
    ch->send(static_cast<uint16_t>(MsgId::Hello), kFlagSync, ch->next_request_id(),
             encode_message(HelloReq{}));
    FrameHeader h;
    std::vector<uint8_t> body;
    ch->read_frame(h, body, channel::Channel::Wait::Timed);
    HelloRep rep;
    std::string message;
    EXPECT_EQ(decode_reply(body, rep, message), 0) << message;
    EXPECT_TRUE(rep.auth_required);
    return rep.challenge;
  };
  // Answers the victim's challenge with `mac`: the reply's error (0: authenticated).
  auto replay = [](channel::Channel& ch, const Mac& mac) {
    ch.send(static_cast<uint16_t>(MsgId::Auth), kFlagSync, ch.next_request_id(),
            encode_message(AuthReq{mac}));
    FrameHeader h;
    std::vector<uint8_t> body;
    ch.read_frame(h, body, channel::Channel::Wait::Timed);
    Empty e;
    std::string message;
    return decode_reply(body, e, message);
  };

  // 1. The fake peer asks for the token with the victim's challenge: a sends no Auth.
  ca.post(static_cast<uint16_t>(MsgId::PeerCopy),
          encode_message(push_copy(src, 0x1000, "fake", voucher())));
  {
    std::unique_ptr<channel::Channel> ch;
    auto [conn, hello_id] = link(ch);
    ASSERT_TRUE(conn) << "a did not connect to its vouched-for peer";
    std::unique_ptr<transport::Connection> vc;
    std::unique_ptr<channel::Channel> vch;
    const Nonce challenge = victim(vc, vch);
    HelloRep rep;
    rep.auth_required = true;
    rep.challenge = challenge;
    rep.known = known_ids();
    ch->send(static_cast<uint16_t>(MsgId::Hello), kFlagReply, hello_id, encode_ok_reply(rep));
    std::optional<Mac> answered;
    try {
      FrameHeader h;
      std::vector<uint8_t> body;
      if (ch->read_frame(h, body, channel::Channel::Wait::TimedOrEof) &&
          h.type == static_cast<uint16_t>(MsgId::Auth))
        answered = decode_message<AuthReq>(body.data(), body.size()).mac;
    } catch (const std::exception&) {  // a closed the link: no answer
    }
    EXPECT_FALSE(answered) << "a answered a peer's token challenge";
    EXPECT_NE(replay(*vch, answered.value_or(Mac{})), 0) << "the answer authenticated a client";
  }
  std::string why = copy_error(ca, 46);
  EXPECT_NE(why.find("never with the token"), std::string::npos) << why;

  // 2. The fake peer goes through the peer proofs with the victim's challenge as its nonce:
  // a's PeerProve over it is no client's answer.
  const PeerVoucher v = voucher();
  ca.post(static_cast<uint16_t>(MsgId::PeerCopy),
          encode_message(push_copy(src, 0x1000, "fake", v)));
  {
    std::unique_ptr<channel::Channel> ch;
    auto [conn, hello_id] = link(ch);
    ASSERT_TRUE(conn) << "a did not connect to its vouched-for peer";
    HelloRep rep;
    rep.known = known_ids();
    ch->send(static_cast<uint16_t>(MsgId::Hello), kFlagReply, hello_id, encode_ok_reply(rep));
    FrameHeader h;
    std::vector<uint8_t> body;
    ASSERT_TRUE(ch->read_frame(h, body, channel::Channel::Wait::Timed));
    ASSERT_EQ(h.type, static_cast<uint16_t>(MsgId::PeerAttach));
    auto attach = decode_message<PeerAttachReq>(body.data(), body.size());
    EXPECT_EQ(attach.ticket, v.id);
    std::unique_ptr<transport::Connection> vc;
    std::unique_ptr<channel::Channel> vch;
    const Nonce challenge = victim(vc, vch);
    PeerAttachRep proof{challenge, peer_link_proof(key, PeerRole::Passive, v.id, v.secret,
                                                   attach.nonce, challenge)};
    ch->send(h.type, kFlagReply, h.request_id, encode_ok_reply(proof));
    ASSERT_TRUE(ch->read_frame(h, body, channel::Channel::Wait::Timed));
    ASSERT_EQ(h.type, static_cast<uint16_t>(MsgId::PeerProve));
    const Mac prove = decode_message<PeerProveReq>(body.data(), body.size()).proof;
    EXPECT_TRUE(
        peer_link_verify(key, PeerRole::Active, v.id, v.secret, attach.nonce, challenge, prove));
    EXPECT_NE(prove, auth_mac(kToken, challenge));
    EXPECT_NE(replay(*vch, prove), 0) << "a's peer proof authenticated a client";
    ch->send(h.type, kFlagReply, h.request_id, encode_error_reply(800, "the test ends the link"));
  }
  why = copy_error(ca, 46);
  EXPECT_NE(why.find("the test ends the link"), std::string::npos) << why;
  EXPECT_TRUE(a.alive());
}

}  // namespace
