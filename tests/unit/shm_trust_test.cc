// The shared-memory transport trusts nothing the client puts in its segment: ring indices are
// checked before use, the segment must be sealed against shrinking and be exactly the announced
// size; and the host backend's capacity ledger cannot be driven below zero or left short.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstring>
#include <future>
#include <thread>

#include "backend/host/host_ledger.h"
#include "transport/shm/segment.h"
#include "transport/shm/shm.h"

using namespace rgpu::transport;

namespace {

constexpr size_t kRing = 4096;

void pass_fd(int sock, int fd) { ASSERT_NO_THROW(shm_send_fd(sock, fd)); }

// A hand-made client: its own segment (sealed or not, of the size it likes) handed to shm_adopt.
struct RawClient {
  int sock = -1, fd = -1;
  ShmSegment* seg = nullptr;
  size_t size = 0;
  std::unique_ptr<Connection> server;
  std::string refused;  // shm_adopt's error, when it refused

  RawClient(bool seal, size_t extra = 0, uint32_t ring_bytes = kRing) {
    int sv[2];
    EXPECT_EQ(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
    sock = sv[0];
    size = shm_segment_size(kRing) + extra;
    std::string why;
    if (seal) {
      fd = shm_create_sealed("test", size, why);
    } else {
      fd = memfd_create("test", MFD_CLOEXEC | MFD_ALLOW_SEALING);
      EXPECT_EQ(ftruncate(fd, static_cast<off_t>(size)), 0);
    }
    EXPECT_GE(fd, 0) << why;
    seg = static_cast<ShmSegment*>(mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0));
    EXPECT_NE(seg, MAP_FAILED);
    seg->magic = kShmMagic;
    seg->ring_bytes = ring_bytes;
    auto adopted = std::async(std::launch::async, [s = sv[1]] { return shm_adopt(s); });
    pass_fd(sock, fd);
    try {
      server = adopted.get();
    } catch (const TransportError& e) {
      refused = e.what();
    }
  }
  ~RawClient() {
    server.reset();
    munmap(seg, size);
    close(fd);
    close(sock);
  }
  char* data(int ring) { return reinterpret_cast<char*>(seg + 1) + ring * kRing; }
};

}  // namespace

TEST(ShmTrust, WellFormedSegmentIsAdoptedAndCarriesBytes) {
  RawClient c(true);
  ASSERT_TRUE(c.server) << c.refused;
  char ack = 0;
  ASSERT_EQ(recv(c.sock, &ack, 1, 0), 1);
  EXPECT_EQ(ack, 'K');
  memcpy(c.data(0), "hello", 5);
  c.seg->rings[0].head.store(5);
  char buf[5];
  c.server->recv(buf, 5);
  EXPECT_EQ(std::string(buf, 5), "hello");
  EXPECT_EQ(c.seg->rings[0].tail.load(), 5u);
}

TEST(ShmTrust, GarbageWriteIndexClosesTheConnectionWithoutAFault) {
  for (uint64_t bad : {uint64_t{kRing + 1}, uint64_t{1} << 40, ~uint64_t{0}}) {
    RawClient c(true);
    ASSERT_TRUE(c.server) << c.refused;
    c.seg->rings[0].head.store(bad);
    char buf[64];
    try {
      c.server->recv(buf, sizeof buf);
      ADD_FAILURE() << "a write index of " << bad << " was accepted";
    } catch (const TransportError& e) {
      EXPECT_NE(std::string(e.what()).find("corrupt"), std::string::npos) << e.what();
    }
    // The connection stays closed: nothing more is read from the segment.
    c.seg->rings[0].head.store(1);
    EXPECT_THROW(c.server->recv(buf, 1), TransportError);
  }
}

TEST(ShmTrust, IndexMovedBackwardsIsRefused) {
  RawClient c(true);
  ASSERT_TRUE(c.server) << c.refused;
  memcpy(c.data(0), "abcd", 4);
  c.seg->rings[0].head.store(4);
  char buf[4];
  c.server->recv(buf, 4);
  c.seg->rings[0].head.store(2);  // behind what the server already consumed
  EXPECT_THROW(c.server->recv(buf, 1), TransportError);
}

TEST(ShmTrust, GarbageReadIndexStopsTheSender) {
  for (uint64_t bad : {uint64_t{12345}, ~uint64_t{0} - 3}) {
    RawClient c(true);
    ASSERT_TRUE(c.server) << c.refused;
    c.seg->rings[1].tail.store(bad);  // the client claims to have read what was never written
    std::vector<char> big(3 * kRing, 'x');
    EXPECT_THROW(c.server->send(big.data(), big.size()), TransportError);
  }
}

TEST(ShmTrust, UnsealedSegmentIsRefused) {
  RawClient c(false);
  EXPECT_FALSE(c.server);
  EXPECT_NE(c.refused.find("not sealed"), std::string::npos) << c.refused;
}

TEST(ShmTrust, SegmentOfTheWrongSizeIsRefused) {
  RawClient c(true, 4096);
  EXPECT_FALSE(c.server);
  EXPECT_NE(c.refused.find("not the"), std::string::npos) << c.refused;
  RawClient d(true, 0, 1u << 30);  // header claims far more than there is
  EXPECT_FALSE(d.server);
}

TEST(ShmTrust, AdoptedSegmentCannotBeTruncated) {
  RawClient c(true);
  ASSERT_TRUE(c.server) << c.refused;
  EXPECT_NE(ftruncate(c.fd, 0), 0);  // the seal holds: the server's mapping can never SIGBUS
  EXPECT_EQ(errno, EPERM);
}

TEST(ShmTrust, CheckSealedNamesWhatIsWrong) {
  std::string why;
  int p[2];
  ASSERT_EQ(pipe(p), 0);
  EXPECT_FALSE(shm_check_sealed(p[0], 1, why));
  EXPECT_NE(why.find("not a memory segment"), std::string::npos) << why;
  close(p[0]);
  close(p[1]);
  int fd = shm_create_sealed("t", 8192, why);
  ASSERT_GE(fd, 0) << why;
  EXPECT_TRUE(shm_check_sealed(fd, 8192, why)) << why;
  EXPECT_FALSE(shm_check_sealed(fd, 4096, why));
  close(fd);
}

TEST(HostLedger, SlotsAddUpAndADeadSessionGivesBackExactlyItsShare) {
  auto* l = rgpu::backend::HostLedger::create(1000);
  ASSERT_TRUE(l);
  int a = l->claim(111), b = l->claim(222);
  ASSERT_GE(a, 0);
  ASSERT_GE(b, 0);
  EXPECT_TRUE(l->reserve(a, 600));
  EXPECT_FALSE(l->reserve(b, 500));  // would over-commit
  EXPECT_EQ(l->used(), 600u);
  EXPECT_TRUE(l->reserve(b, 400));
  EXPECT_FALSE(l->reserve(b, 1));
  l->release(b, 1000);  // more than it holds: never below zero, never others' share
  EXPECT_EQ(l->used(), 600u);
  l->release_process(111);
  EXPECT_EQ(l->used(), 0u);
  EXPECT_FALSE(l->reserve(-1, 1));
  EXPECT_FALSE(l->reserve(rgpu::backend::HostLedger::kSlots, 1));
  munmap(l, sizeof *l);
}

TEST(HostLedger, ConcurrentReservationsNeverOverCommit) {
  auto* l = rgpu::backend::HostLedger::create(100);
  ASSERT_TRUE(l);
  std::vector<std::thread> ts;
  std::atomic<int> granted{0};
  for (int t = 0; t < 4; ++t)
    ts.emplace_back([&, t] {
      int s = l->claim(1000 + t);
      for (int i = 0; i < 10000; ++i) {
        if (l->reserve(s, 10)) {
          granted.fetch_add(1);
          EXPECT_LE(l->used(), 100u);
          l->release(s, 10);
          granted.fetch_sub(1);
        }
      }
    });
  for (auto& t : ts) t.join();
  EXPECT_EQ(l->used(), 0u);
  munmap(l, sizeof *l);
}
