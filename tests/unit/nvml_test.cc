// The nvml group's logic without a daemon: NVML's text forms (frontend/nvml/nvml_text.h), the
// handshake's tolerance of an older peer's Hello (no `purpose`), the nvml messages on the wire, and
// the host backend's answers (backend/host/host_nvml.cc).
#include <dlfcn.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include "backend/gpu_query.h"
#include "backend/host/host_ledger.h"
#include "frontend/nvml/nvml_text.h"
#include "proto/messages.h"

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

}  // namespace
