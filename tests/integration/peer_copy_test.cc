// Server-to-server copies (docs/architecture.md, "Server-to-server copies"), host backend: three
// rgpuds with one device each, copies between every pair (tests/cuda/peer_copies.cu); a server
// killed in the middle of large copies is an error within seconds, naming it; tickets spoken to
// directly: a wrong secret, a peer without the peer key, a used ticket and an invented one are
// refused, a good one attaches one link, which then serves copy after copy within the session's
// memory only.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/random.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <fstream>
#include <iterator>
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

namespace {

using Clock = std::chrono::steady_clock;

// rgpuds on one machine map each other's memory (server/peer_ipc.h): true.  With RGPU_PEER_IPC=0
// in their environment they copy through staging buffers over the link: false.
struct PeerIpcSetting {
  explicit PeerIpcSetting(bool on) {
    if (!on) setenv("RGPU_PEER_IPC", "0", 1);
  }
  ~PeerIpcSetting() { unsetenv("RGPU_PEER_IPC"); }
};
std::string ipc_name(const ::testing::TestParamInfo<bool>& i) { return i.param ? "ipc" : "tcp"; }

// Whether a session process of rgpud `daemon` maps memory another rgpud exported (the host
// backend's exports are memfds named rgpu-ipc).
bool maps_peer_memory(pid_t daemon) {
  for (pid_t p : live_children(daemon)) {
    std::ifstream maps("/proc/" + std::to_string(p) + "/maps");
    std::string line;
    while (std::getline(maps, line))
      if (line.find("rgpu-ipc") != std::string::npos) return true;
  }
  return false;
}

class PeerCopies : public ::testing::TestWithParam<bool> {};

TEST_P(PeerCopies, EveryPairFormAndSizeBetweenThreeServers) {
  // The host backend loads code as CUDA's lazy loading does (synchronizing the context under a
  // driver lock): a kernel first launched on a server while a copy holds its stream must not
  // deadlock the copy (seen on two H200s; Session::settle_peer_copies).
  setenv("RGPU_HOST_LAZY_LOADING", "1", 1);
  PeerIpcSetting ipc(GetParam());
  Daemon a, b, c;
  unsetenv("RGPU_HOST_LAZY_LOADING");
  Env env = a.client_env();
  env["RGPU_SERVERS"] = a.servers() + "," + b.servers() + "," + c.servers();
  Result r = run({cuda_program("peer_copies")}, env, 280);
  EXPECT_EQ(r.status, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("peer_copies: passed"), std::string::npos) << r.out << r.err;
  EXPECT_TRUE(a.alive() && b.alive() && c.alive());
}

INSTANTIATE_TEST_SUITE_P(Peer, PeerCopies, ::testing::Bool(), ipc_name);

// 0: the passive session process is killed; 1: the passive rgpud is.  With and without the
// mapped path (the copy's memory stays mapped on the active server: its link tells the error).
class PeerKill : public ::testing::TestWithParam<std::tuple<int, bool>> {};

TEST_P(PeerKill, AServerGoneMidCopyIsAnErrorWithinSeconds) {
  const bool mapped = std::get<1>(GetParam());
  PeerIpcSetting ipc(mapped);
  Daemon a, b;  // device 0 on a (the copies' source, passive), device 1 on b (pulls)
  Env env = a.client_env();
  env["RGPU_SERVERS"] = a.servers() + "," + b.servers();
  env["RGPU_TIMEOUT"] = "5";
  Child prog = spawn({cuda_program("peer_copies"), "kill"}, env);
  ASSERT_TRUE(prog.wait_line("copying", 120)) << "the copies did not start";
  // The first copy is over: the active server maps the source's memory, or it does not.
  EXPECT_EQ(maps_peer_memory(b.pid()), mapped);
  std::vector<pid_t> sessions = live_children(a.pid());
  ASSERT_FALSE(sessions.empty());
  auto killed = Clock::now();
  if (std::get<0>(GetParam()) == 0) {
    for (pid_t p : sessions) kill(p, SIGKILL);
  } else {
    kill(a.pid(), SIGKILL);
  }
  std::string line;
  ASSERT_TRUE(prog.wait_line("copy failed", 20, &line)) << "no error after the server died";
  auto took = std::chrono::duration_cast<std::chrono::seconds>(Clock::now() - killed).count();
  EXPECT_LT(took, 12) << line;
  ASSERT_TRUE(prog.wait_line("names the server: ", 10, &line));
  EXPECT_NE(line.find("yes"), std::string::npos) << "the error does not name " << a.servers();
  EXPECT_TRUE(b.alive());
  // The active server's session is still there for the client, and serves it: its copy ended.
  EXPECT_FALSE(live_children(b.pid()).empty());
}
INSTANTIATE_TEST_SUITE_P(Peer, PeerKill,
                         ::testing::Combine(::testing::Values(0, 1), ::testing::Bool()),
                         [](const ::testing::TestParamInfo<std::tuple<int, bool>>& i) {
                           return std::string(std::get<0>(i.param) ? "rgpud" : "session") +
                                  (std::get<1>(i.param) ? "_ipc" : "_tcp");
                         });

std::string read_file(const std::string& path) {
  std::ifstream in(path);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}
size_t count_of(const std::string& text, const std::string& what) {
  size_t n = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

// The active rgpud of the direct-path tests: its trace in its log, and time enough for the passive
// one to handle each copy's fence (300 µs by default; a sanitized build on two busy cores can
// take longer, and the copy would then ask the passive server instead).
const Env kTracedActive{
    {"RGPU_LOG", "notice"}, {"RGPU_PEER_TRACE", "1"}, {"RGPU_PEER_FENCE_SPIN_US", "200000"}};

// Repeated copies between rgpuds on one machine take the direct path (server/peer_fences.h): no
// round trip to the passive server, the active stream waits on the GPU for its fence.  The
// active rgpud's trace says so; the bytes are checked by the program (each copy after a kernel
// on the passive server that changes the source).
TEST(PeerDirect, RepeatedCopiesNeedNoRoundTrip) {
  char log[] = "/tmp/rgpud-peer-log-XXXXXX";
  int fd = mkstemp(log);
  ASSERT_GE(fd, 0);
  close(fd);
  Daemon a;
  Daemon b({}, kTracedActive, log);
  Env env = a.client_env();
  env["RGPU_SERVERS"] = a.servers() + "," + b.servers();
  Result r = run({cuda_program("peer_copies"), "direct"}, env, 120);
  EXPECT_EQ(r.status, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("direct copies wrong: 0"), std::string::npos) << r.out << r.err;
  const std::string text = read_file(log);
  unlink(log);
  // The first copy maps the memory; the others go direct (a few may not, on a loaded machine).
  EXPECT_GE(count_of(text, "direct (queued)"), 45u) << text;
  EXPECT_EQ(count_of(text, "direct (failed)"), 0u) << text;
}

// A cudaMemcpyPeer is host-asynchronous; the source device's next call waits for it unless the
// program has synchronized the destination since (device or legacy stream): then no round trip
// of the client's own for it (RGPU_STATS: StreamSynchronize only the program's ten).
TEST(PeerSettle, ASynchronizedDestinationOwesTheSourceNothing) {
  Daemon a, b;
  Env env = a.client_env();
  env["RGPU_SERVERS"] = a.servers() + "," + b.servers();
  env["RGPU_STATS"] = "1";
  Result r = run({cuda_program("peer_copies"), "settled"}, env, 120);
  EXPECT_EQ(r.status, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("settled copies wrong: 0"), std::string::npos) << r.out << r.err;
  const std::string key = "rgpu stats: StreamSynchronize ";
  const size_t at = r.err.find(key);
  ASSERT_NE(at, std::string::npos) << r.err;
  EXPECT_EQ(std::stoull(r.err.substr(at + key.size())), 10u) << r.err;
}

// A direct copy waits on the GPU for a passive server whose kernel runs for a minute; the passive
// session is killed: the active server's link finds out (PeerFenceQuery) and the copy's stream
// fails within seconds (without the watch it would wait for ever).
TEST(PeerDirect, APassiveServerKilledWhileACopyWaitsIsAnError) {
  char log[] = "/tmp/rgpud-peer-log-XXXXXX";
  int fd = mkstemp(log);
  ASSERT_GE(fd, 0);
  close(fd);
  Daemon a;
  Daemon b({}, kTracedActive, log);
  Env env = a.client_env();
  env["RGPU_SERVERS"] = a.servers() + "," + b.servers();
  env["RGPU_TIMEOUT"] = "5";
  Child prog = spawn({cuda_program("peer_copies"), "killwait"}, env);
  ASSERT_TRUE(prog.wait_line("waiting", 120)) << "the copy did not start";
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  auto killed = Clock::now();
  for (pid_t p : live_children(a.pid())) kill(p, SIGKILL);
  std::string line;
  ASSERT_TRUE(prog.wait_line("copy ", 20, &line)) << "the copy's stream still waits";
  auto took = std::chrono::duration_cast<std::chrono::seconds>(Clock::now() - killed).count();
  EXPECT_NE(line.find("copy failed"), std::string::npos) << line;
  EXPECT_LT(took, 12) << line;
  EXPECT_TRUE(b.alive());
  // The copy that waited was a direct one (the link's watch failed it, not a round trip).
  const std::string text = read_file(log);
  unlink(log);
  const size_t last = text.rfind("peer copy of");
  ASSERT_NE(last, std::string::npos) << text;
  EXPECT_NE(text.find("direct (queued)", last), std::string::npos) << text;
}

// A raw link to rgpud: connect, handshake (as a client, or as a peer link).
struct Raw {
  std::unique_ptr<rgpu::transport::Connection> conn;
  std::unique_ptr<channel::Channel> ch;
  int32_t handshake = -1;
  Raw(uint16_t port, LinkPurpose purpose) {
    conn = rgpu::transport::tcp_connect("127.0.0.1", port, 10);
    conn->set_recv_timeout(10);
    ch = std::make_unique<channel::Channel>(*conn);
    HelloReq hello;
    hello.purpose = static_cast<uint32_t>(purpose);
    handshake = channel::request_handshake(*ch, hello, std::nullopt).error;
  }
  // Sends a synchronous request and returns the reply's error (message in `why`); AsyncData
  // frames before it go to `data`.
  template <class Req, class Rep>
  int32_t call(MsgId type, const Req& q, Rep& rep, std::string* why = nullptr,
               const void* payload = nullptr, size_t n = 0, std::vector<uint8_t>* data = nullptr) {
    uint64_t id = ch->next_request_id();
    iovec v{const_cast<void*>(payload), n};
    ch->send(static_cast<uint16_t>(type), kFlagSync, id, encode_message(q), n ? &v : nullptr,
             n ? 1 : 0);
    FrameHeader h;
    std::vector<uint8_t> body;
    for (;;) {
      ch->read_frame(h, body, channel::Channel::Wait::Timed);
      if (h.type == static_cast<uint16_t>(MsgId::AsyncData) && data) {
        auto d = decode_message<AsyncDataMsg>(body.data(), body.size());
        data->resize(std::max<size_t>(data->size(), d.offset + h.payload_len));
        iovec in{data->data() + d.offset, h.payload_len};
        ch->read_payload(&in, 1);
        continue;
      }
      if (h.flags & kFlagReply) break;
      ch->skip_rest(h);
    }
    EXPECT_EQ(h.request_id, id);
    std::string message;
    int32_t e = decode_reply(body, rep, message);
    if (why) *why = message;
    return e;
  }
};

TEST(PeerTickets, ForgedUsedAndInventedTicketsAreRefused) {
  Daemon d;
  Raw client(d.port(), LinkPurpose::Session);
  ASSERT_EQ(client.handshake, 0);
  MallocRep m;
  ASSERT_EQ(client.call(MsgId::Malloc, MallocReq{0, 4096, 0}, m), 0);
  std::vector<uint8_t> bytes(4096);
  for (size_t i = 0; i < bytes.size(); ++i) bytes[i] = static_cast<uint8_t>(i * 7 + 3);
  Empty ok;
  ASSERT_EQ(client.call(MsgId::MemcpyHtoD, MemcpyHtoDReq{0, m.ptr, 4096}, ok, nullptr, bytes.data(),
                        bytes.size()),
            0);
  auto memory = [&] {
    std::vector<uint8_t> now;
    Empty e;
    EXPECT_EQ(
        client.call(MsgId::MemcpyDtoH, MemcpyDtoHReq{0, m.ptr, 4096}, e, nullptr, nullptr, 0, &now),
        0);
    return now;
  };
  auto ticket = [&] {
    PeerTicketRep t;
    EXPECT_EQ(client.call(MsgId::PeerTicket, Empty{}, t), 0);
    return t.ticket;
  };
  auto begin = [](Raw& peer, uint64_t ptr, uint64_t size) {
    peer.ch->send(static_cast<uint16_t>(MsgId::PeerBegin), 0, peer.ch->next_request_id(),
                  encode_message(PeerBeginReq{0, ptr, size, size, 1}));
  };
  auto read = [&](Raw& peer, uint64_t ptr, uint64_t size, std::vector<uint8_t>* out,
                  std::string* why) {
    begin(peer, ptr, size);
    Empty e;
    return peer.call(MsgId::PeerRead, PeerReadReq{0, size}, e, why, nullptr, 0, out);
  };
  auto write = [&](Raw& peer, uint64_t ptr, const std::vector<uint8_t>& data, std::string* why) {
    begin(peer, ptr, data.size());
    iovec v{const_cast<uint8_t*>(data.data()), data.size()};
    peer.ch->send(static_cast<uint16_t>(MsgId::PeerWrite), 0, peer.ch->next_request_id(),
                  encode_message(PeerWriteReq{0, data.size()}), &v, 1);
    Empty e;
    return peer.call(MsgId::PeerFinish, Empty{}, e, why);
  };
  // This test plays the active rgpud, which holds the peer key the rgpuds of this test share.
  std::string key_error;
  auto secret_text = rgpu::proto::read_token_file(peer_key_file(), key_error);
  ASSERT_TRUE(secret_text) << key_error;
  const PeerKey key = derive_peer_key(*secret_text);
  // PeerAttach (the rgpud's proof back: `proved`), then PeerProve; the first refusal's error.
  bool proved = false;
  auto attach = [&](const PeerTicketId& id, const PeerSecret& secret, std::string* why,
                    const PeerKey& k) {
    proved = false;
    auto peer = std::make_unique<Raw>(d.port(), LinkPurpose::PeerLink);
    EXPECT_EQ(peer->handshake, 0);
    Nonce mine;
    getrandom(mine.data(), mine.size(), 0);
    PeerAttachRep rep;
    int32_t r = peer->call(MsgId::PeerAttach, PeerAttachReq{id, mine}, rep, why);
    if (r == 0) {
      proved = peer_link_verify(k, PeerRole::Passive, id, secret, mine, rep.nonce, rep.proof);
      Empty e;
      r = peer->call(
          MsgId::PeerProve,
          PeerProveReq{peer_link_proof(k, PeerRole::Active, id, secret, mine, rep.nonce)}, e, why);
    }
    return std::make_pair(r, std::move(peer));
  };
  std::string why;

  PeerVoucher t1 = ticket();
  EXPECT_TRUE(peer_voucher_verify(key, t1));  // vouched for with the peer key
  EXPECT_EQ(t1.endpoint, d.servers());        // where this client reached it
  PeerSecret wrong = t1.secret;
  wrong[31] ^= 1;
  EXPECT_EQ(attach(t1.id, wrong, &why, key).first, 800);
  EXPECT_FALSE(proved);  // its proof is for the ticket's own secret
  EXPECT_NE(why.find("did not prove"), std::string::npos) << why;
  // A wrong secret used the ticket up: the right one no longer opens it.
  EXPECT_EQ(attach(t1.id, t1.secret, &why, key).first, 800);
  EXPECT_NE(why.find("unknown, used or expired"), std::string::npos) << why;
  // A peer without the peer key (a client that holds a ticket, say): refused, and the rgpud's
  // proof means nothing to it.
  PeerVoucher t0 = ticket();
  EXPECT_EQ(attach(t0.id, t0.secret, &why, derive_peer_key("not the peer key")).first, 800);
  EXPECT_FALSE(proved);
  EXPECT_NE(why.find("did not prove"), std::string::npos) << why;

  PeerVoucher t2 = ticket();
  {
    auto [r, peer] = attach(t2.id, t2.secret, &why, key);
    ASSERT_EQ(r, 0) << why;
    EXPECT_TRUE(proved);
    // Copy after copy over the one link.
    std::vector<uint8_t> got;
    EXPECT_EQ(read(*peer, m.ptr, 4096, &got, &why), 0) << why;
    EXPECT_EQ(got, bytes);
    std::vector<uint8_t> part(1000, 0x5a);
    EXPECT_EQ(write(*peer, m.ptr + 96, part, &why), 0) << why;
    std::copy(part.begin(), part.end(), bytes.begin() + 96);
    EXPECT_EQ(memory(), bytes);
    // Rows the session does not own: refused, and the link stays in step.
    EXPECT_EQ(read(*peer, m.ptr + 4096 * 1024, 16, &got, &why), 1) << why;
    EXPECT_NE(why.find("not inside one device allocation"), std::string::npos) << why;
    std::vector<uint8_t> junk(4096, 0xee);
    EXPECT_EQ(write(*peer, m.ptr + 1, junk, &why), 1) << why;
    EXPECT_EQ(memory(), bytes);
    // A read that does not cover its copy's rows.
    begin(*peer, m.ptr, 4096);
    Empty e;
    EXPECT_EQ(peer->call(MsgId::PeerRead, PeerReadReq{0, 16}, e, &why), 1) << why;
    got.clear();
    EXPECT_EQ(read(*peer, m.ptr, 4096, &got, &why), 0) << why;
    EXPECT_EQ(got, bytes);
  }
  // Replayed: refused.
  EXPECT_EQ(attach(t2.id, t2.secret, &why, key).first, 800);
  EXPECT_NE(why.find("unknown, used or expired"), std::string::npos) << why;
  // Invented: refused.
  PeerTicketId invented;
  PeerSecret secret;
  getrandom(invented.data(), invented.size(), 0);
  getrandom(secret.data(), secret.size(), 0);
  EXPECT_EQ(attach(invented, secret, &why, key).first, 800);
  // A client session cannot speak a peer link's requests.
  PeerVoucher t3 = ticket();
  PeerAttachRep no;
  EXPECT_EQ(client.call(MsgId::PeerAttach, PeerAttachReq{t3.id, {}}, no, &why), 801);
  EXPECT_EQ(client.call(MsgId::PeerProve, PeerProveReq{}, ok, &why), 801);
  EXPECT_EQ(memory(), bytes);
  EXPECT_TRUE(d.alive());
}

}  // namespace
