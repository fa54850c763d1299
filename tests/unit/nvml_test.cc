// The nvml group's logic without a daemon: NVML's text forms (frontend/nvml/nvml_text.h), the
// handshake's tolerance of an older peer's Hello (no `purpose`), the nvml messages on the wire, and
// the host backend's answers (backend/host/host_nvml.cc).
#include "server/nvml.h"

#include <dlfcn.h>
#include <gtest/gtest.h>
#include <sys/socket.h>
#include <unistd.h>

#include <thread>

#include "backend/gpu_query.h"
#include "backend/host/host_executor.h"
#include "backend/host/host_ledger.h"
#include "frontend/nvml/nvml_text.h"
#include "proto/frame.h"
#include "proto/messages.h"
#include "server/session.h"
#include "transport/tcp/tcp.h"

using namespace rgpu;

namespace {

TEST(NvmlText, UuidAndBusIdForms) {
  std::array<uint8_t, 16> u{};
  for (int i = 0; i < 16; ++i) u[i] = static_cast<uint8_t>(0xA0 + i);
  EXPECT_EQ(nvml::uuid_text(u), "GPU-a0a1a2a3-a4a5-a6a7-a8a9-aaabacadaeaf");
  nvml::PciAddress a{0x12, 0x3b, 0x1f, 0};
  EXPECT_EQ(nvml::bus_id_text(a), "00000012:3B:1F.0");
  EXPECT_EQ(nvml::bus_id_legacy_text(a), "0012:3B:1F.0");
}

TEST(NvmlText, ParsesBusIdsNvmlAccepts) {
  const nvml::PciAddress want{0, 0x3b, 0, 0};
  for (const char* s : {"00000000:3B:00.0", "0000:3b:00.0", "3b:00.0", "3B:00", "0:3b:0.0"}) {
    auto p = nvml::parse_bus_id(s);
    ASSERT_TRUE(p.has_value()) << s;
    EXPECT_EQ(*p, want) << s;
  }
  auto f = nvml::parse_bus_id("0001:02:03.4");
  ASSERT_TRUE(f.has_value());
  EXPECT_EQ(*f, (nvml::PciAddress{1, 2, 3, 4}));
  for (const char* s : {"", "3b", "zz:00.0", "0:1:2:3", "3b:20.0", "3b:00.8", "123456789:00:00.0",
                        "3b:00.", ":00.0", "3b:100.0"})
    EXPECT_FALSE(nvml::parse_bus_id(s).has_value()) << s;
}

TEST(NvmlText, CopyOutNeedsRoomForTheZero) {
  char buf[4] = {'x', 'x', 'x', 'x'};
  EXPECT_FALSE(nvml::copy_out("abcd", buf, sizeof buf));
  EXPECT_EQ(buf[0], 'x');
  EXPECT_TRUE(nvml::copy_out("abc", buf, sizeof buf));
  EXPECT_STREQ(buf, "abc");
  EXPECT_FALSE(nvml::copy_out("a", nullptr, 10));
}

// An older client's Hello ends before `purpose`: it decodes with purpose 0 (a session), and a
// newer one's carries it.
TEST(NvmlProto, HelloWithoutPurposeIsASession) {
  proto::HelloReq h;
  h.arch = "x86_64-le-lp64";
  h.known = {1, 2, 3};
  h.purpose = 1;
  auto bytes = proto::encode_message(h);
  auto full = proto::decode_message_prefix<proto::HelloReq>(bytes.data(), bytes.size());
  EXPECT_EQ(full.purpose, 1u);
  EXPECT_EQ(full.known, h.known);
  auto older = proto::decode_message_prefix<proto::HelloReq>(bytes.data(), bytes.size() - 4);
  EXPECT_EQ(older.purpose, 0u);
  EXPECT_EQ(older.known, h.known);
  // A field cut in the middle is still malformed.
  EXPECT_THROW(proto::decode_message_prefix<proto::HelloReq>(bytes.data(), bytes.size() - 2),
               proto::ProtoError);
}

TEST(NvmlProto, DeviceReplyRoundTrips) {
  proto::NvmlDeviceRep r;
  r.have = proto::kNvmlIdentity | proto::kNvmlProcesses | proto::kNvmlClocks;
  r.name = "GPU";
  r.uuid[3] = 7;
  r.pci_bus = 0x3b;
  r.clocks = {1, 2, 3, proto::kNvmlNoClock};
  r.processes = {{42, 1ull << 40}, {43, ~0ull}};
  r.peers = {1, 3};
  auto bytes = proto::encode_message(r);
  auto back = proto::decode_message<proto::NvmlDeviceRep>(bytes.data(), bytes.size());
  EXPECT_EQ(back.have, r.have);
  EXPECT_EQ(back.name, "GPU");
  EXPECT_EQ(back.uuid, r.uuid);
  EXPECT_EQ(back.pci_bus, 0x3bu);
  EXPECT_EQ(back.clocks, r.clocks);
  ASSERT_EQ(back.processes.size(), 2u);
  EXPECT_EQ(back.processes[1].pid, 43u);
  EXPECT_EQ(back.processes[1].used_memory, ~0ull);
  EXPECT_EQ(back.peers, r.peers);
}

TEST(NvmlHostBackend, AnswersFromTheLedgerAndSaysWhatItCannot) {
  auto* l0 = backend::HostLedger::create(1ull << 30);
  auto* l1 = backend::HostLedger::create(2ull << 30);
  ASSERT_NE(l0, nullptr);
  ASSERT_NE(l1, nullptr);
  auto q = backend::make_host_gpu_query({l0, l1});
  EXPECT_EQ(q->device_count(), 2);
  const uint32_t all = ~0u;
  proto::NvmlDeviceRep r;
  ASSERT_TRUE(q->device(1, all, r).ok());
  EXPECT_EQ(r.total_memory, 2ull << 30);
  EXPECT_EQ(r.memory_used, 0u);
  EXPECT_EQ(r.pci_bus, 2u);
  EXPECT_EQ(r.peers, std::vector<uint32_t>{0});
  // What a GPU would measure is not invented.
  for (uint32_t f : {proto::kNvmlTemp, proto::kNvmlPower, proto::kNvmlPowerLimit,
                     proto::kNvmlClocks, proto::kNvmlSerial})
    EXPECT_FALSE(r.have & f) << f;
  EXPECT_TRUE(r.have & proto::kNvmlMemory);
  EXPECT_TRUE(r.processes.empty());
  // Memory a session holds shows as used.
  int slot = l1->claim(getpid());
  ASSERT_GE(slot, 0);
  ASSERT_TRUE(l1->reserve(slot, 64u << 20));
  proto::NvmlDeviceRep after;
  ASSERT_TRUE(q->device(1, proto::kNvmlMemory, after).ok());
  EXPECT_EQ(after.memory_used, 64u << 20);
  EXPECT_EQ(after.memory_free, (2ull << 30) - (64u << 20));
  EXPECT_EQ(after.have, proto::kNvmlIdentity | proto::kNvmlMemory);  // only what was asked
  proto::NvmlDeviceRep procs;
  ASSERT_TRUE(q->device(1, proto::kNvmlProcesses, procs).ok());
  ASSERT_EQ(procs.processes.size(), 1u);  // this process holds a slot of GPU 1's ledger
  EXPECT_EQ(procs.processes[0].pid, static_cast<uint32_t>(getpid()));
  EXPECT_EQ(procs.processes[0].used_memory, 64u << 20);
  l1->release(slot, 64u << 20);
  l1->release_process(getpid());
  proto::NvmlDeviceRep bad;
  EXPECT_EQ(q->device(2, all, bad).code, err::InvalidDevice);
}

// rgpud tells rgpu's own libnvidia-ml.so.1 from NVIDIA's (which it reads) by the marker.
TEST(NvmlServerLoad, RecognisesRgpusOwnLibrary) {
  void* ours = dlopen(RGPU_LIBNVML, RTLD_NOW | RTLD_LOCAL);
  ASSERT_NE(ours, nullptr) << dlerror();
  EXPECT_TRUE(backend::is_rgpu_nvml(ours));
  void* other = dlopen("libm.so.6", RTLD_NOW | RTLD_LOCAL);  // no nvmlErrorString at all
  ASSERT_NE(other, nullptr);
  EXPECT_FALSE(backend::is_rgpu_nvml(other));
  dlclose(other);
  dlclose(ours);
}

// The cuda backend's answers for a GPU its NVML does not know (here no NVIDIA NVML at all, or one
// whose devices do not match the probe's made-up UUID): the probe's identity and peers, nothing
// invented beyond them.
TEST(NvmlCudaBackend, WithoutNvmlOnlyTheProbesIdentity) {
  proto::NvmlProbeTable probe;
  auto& g = probe.gpus.emplace_back();
  g.have = proto::kNvmlIdentity | proto::kNvmlPeers;
  g.name = "made-up GPU";
  g.uuid[0] = 0xEE;
  g.pci_domain = 0xfffe;  // no real GPU's, so NVML's PCI fallback cannot match either
  g.pci_bus = 0xfe;
  g.total_memory = 1ull << 34;
  g.cc_major = 9;
  g.peers = {1};
  auto q = backend::make_cuda_gpu_query(probe, 13000);
  EXPECT_EQ(q->device_count(), 1);
  proto::NvmlDeviceRep r;
  ASSERT_TRUE(q->device(0, ~0u, r).ok());
  EXPECT_EQ(r.have, proto::kNvmlIdentity | proto::kNvmlPeers);
  EXPECT_EQ(r.name, "made-up GPU");
  EXPECT_EQ(r.total_memory, 1ull << 34);
  EXPECT_EQ(r.peers, std::vector<uint32_t>{1});
  proto::NvmlDeviceRep id_only;
  ASSERT_TRUE(q->device(0, proto::kNvmlIdentity, id_only).ok());
  EXPECT_EQ(id_only.have, proto::kNvmlIdentity);  // peers only when asked
  EXPECT_TRUE(id_only.peers.empty());
  proto::NvmlSystemRep sys;
  q->system(sys);
  EXPECT_EQ(sys.gpu_count, 1u);
  EXPECT_EQ(sys.cuda_driver_version, 13000);
  EXPECT_EQ(q->device(1, ~0u, r).code, err::InvalidDevice);
}

// A query link (server/nvml.h) over a socket pair: it answers the nvml requests and Ping, and
// refuses everything else without closing; a payload ends it.
TEST(NvmlQueryLink, AnswersQueriesAndRefusesTheRest) {
  int fds[2];
  ASSERT_EQ(socketpair(AF_UNIX, SOCK_STREAM, 0, fds), 0);
  auto client = transport::tcp_adopt(fds[0], "test-client");
  auto server_conn = transport::tcp_adopt(fds[1], "test-server");
  auto* ledger = backend::HostLedger::create(256u << 20);
  auto q = backend::make_host_gpu_query({ledger});
  std::thread server([&] {
    server::serve_query_link(*server_conn, *q, proto::known_ids(), "test", 5);
    server_conn->shutdown();
  });
  auto send = [&](uint16_t type, const std::vector<uint8_t>& body, uint64_t id,
                  uint64_t payload_len = 0) {
    proto::FrameHeader h{type, proto::kFlagSync, static_cast<uint32_t>(body.size()), id,
                         payload_len};
    uint8_t raw[proto::kHeaderSize];
    proto::encode_header(h, raw);
    iovec v[2] = {{raw, sizeof raw}, {const_cast<uint8_t*>(body.data()), body.size()}};
    client->send_all(v, 2);
  };
  auto read = [&](std::vector<uint8_t>& body) {
    uint8_t raw[proto::kHeaderSize];
    client->recv(raw, sizeof raw);
    proto::FrameHeader h = proto::decode_header(raw);
    body.resize(h.body_len);
    if (h.body_len) client->recv(body.data(), body.size());
    return h;
  };
  std::vector<uint8_t> body;
  std::string msg;

  send(static_cast<uint16_t>(proto::MsgId::NvmlDevice),
       proto::encode_message(proto::NvmlDeviceReq{0, proto::kNvmlIdentity | proto::kNvmlTemp}), 7);
  proto::FrameHeader h = read(body);
  EXPECT_EQ(h.request_id, 7u);
  EXPECT_TRUE(h.flags & proto::kFlagReply);
  proto::NvmlDeviceRep dev;
  ASSERT_EQ(proto::decode_reply(body, dev, msg), 0) << msg;
  EXPECT_EQ(dev.name, "rgpu host backend (test double, no GPU)");
  EXPECT_EQ(dev.total_memory, 256u << 20);
  EXPECT_EQ(dev.have, proto::kNvmlIdentity);  // no temperature from the double

  send(static_cast<uint16_t>(proto::MsgId::NvmlDevice),
       proto::encode_message(proto::NvmlDeviceReq{3, proto::kNvmlIdentity}), 8);
  read(body);
  EXPECT_EQ(proto::decode_reply(body, dev, msg), err::InvalidDevice);
  EXPECT_NE(msg.find("GPU 3 does not exist"), std::string::npos) << msg;

  send(static_cast<uint16_t>(proto::MsgId::NvmlSystem), {}, 9);
  read(body);
  proto::NvmlSystemRep sys;
  ASSERT_EQ(proto::decode_reply(body, sys, msg), 0) << msg;
  EXPECT_EQ(sys.gpu_count, 1u);

  send(static_cast<uint16_t>(proto::MsgId::DeviceSynchronize),
       proto::encode_message(proto::DeviceSynchronizeReq{}), 10);
  read(body);
  proto::Empty none;
  EXPECT_EQ(proto::decode_reply(body, none, msg), err::NotSupported);
  EXPECT_NE(msg.find("for NVML queries only"), std::string::npos) << msg;

  send(static_cast<uint16_t>(proto::MsgId::Ping), {}, 11);  // the link lives on
  h = read(body);
  EXPECT_EQ(h.request_id, 11u);
  EXPECT_EQ(proto::decode_reply(body, none, msg), 0);

  send(static_cast<uint16_t>(proto::MsgId::NvmlSystem), {}, 12, 16);  // a payload: ended
  server.join();
  client->shutdown();
}

// A full session answers the same requests from the same GpuQuery (SessionConfig::gpus).
TEST(NvmlQueryLink, SessionsAnswerThemToo) {
  int fds[2];
  ASSERT_EQ(socketpair(AF_UNIX, SOCK_STREAM, 0, fds), 0);
  auto client = transport::tcp_adopt(fds[0], "test-client");
  auto server_conn = transport::tcp_adopt(fds[1], "test-server");
  auto* ledger = backend::HostLedger::create(128u << 20);
  auto q = backend::make_host_gpu_query({ledger});
  std::thread server([&] {
    auto exec = backend::make_host_executor({ledger});
    server::SessionConfig cfg{std::nullopt, "test"};
    cfg.gpus = q.get();
    server::Session s(*server_conn, *exec, cfg);
    s.run();
    server_conn->shutdown();
  });
  auto call = [&](proto::MsgId type, const std::vector<uint8_t>& body, uint64_t id) {
    proto::FrameHeader h{static_cast<uint16_t>(type), proto::kFlagSync,
                         static_cast<uint32_t>(body.size()), id, 0};
    uint8_t raw[proto::kHeaderSize];
    proto::encode_header(h, raw);
    iovec v[2] = {{raw, sizeof raw}, {const_cast<uint8_t*>(body.data()), body.size()}};
    client->send_all(v, 2);
    for (;;) {  // skip anything pushed unasked
      client->recv(raw, sizeof raw);
      proto::FrameHeader r = proto::decode_header(raw);
      std::vector<uint8_t> out(r.body_len);
      if (r.body_len) client->recv(out.data(), out.size());
      if ((r.flags & proto::kFlagReply) && r.request_id == id) return out;
    }
  };
  std::string msg;
  proto::HelloRep hello;
  ASSERT_EQ(proto::decode_reply(
                call(proto::MsgId::Hello, proto::encode_message(proto::HelloReq{}), 1), hello, msg),
            0)
      << msg;
  proto::NvmlDeviceRep dev;
  ASSERT_EQ(proto::decode_reply(
                call(proto::MsgId::NvmlDevice,
                     proto::encode_message(proto::NvmlDeviceReq{0, proto::kNvmlProcesses}), 2),
                dev, msg),
            0)
      << msg;
  EXPECT_TRUE(dev.have & proto::kNvmlProcesses);
  ASSERT_EQ(dev.processes.size(), 1u);  // this session's executor holds a ledger slot
  client->shutdown();
  server.join();
}

}  // namespace
