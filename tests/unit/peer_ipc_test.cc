// Mapped server-to-server copies (server/peer_ipc.h) against the host backend: the passive end's
// exports (kept while the allocation they were made for lives, dropped and told when it goes, a
// rows' allocation being freed is not exported, forgotten ones exported again) and the active end's
// imports (a reply naming rows outside its export or a descriptor unasked breaks the link, drops
// wait for flush()).
#include "server/peer_ipc.h"

#include <gtest/gtest.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstring>
#include <map>
#include <stdexcept>
#include <thread>

#include "backend/gate.h"
#include "backend/host/host_executor.h"
#include "backend/host/host_ledger.h"

using namespace rgpu;
using rgpu::proto::PeerIpcMapRep;
using rgpu::server::PeerExports;
using rgpu::server::PeerImports;
using rgpu::server::PeerRows;

namespace {

constexpr uint64_t kMiB = 1u << 20;

PeerRows rows(uint64_t base, uint64_t bytes) { return PeerRows{0, base, bytes, bytes, 1}; }

struct Fixture {
  std::unique_ptr<backend::Executor> exec;
  uint64_t window = 0;
  int sv[2] = {-1, -1};
  std::map<uint64_t, uint64_t> stamps;  // allocation base -> stamp (what the table would say)
  Fixture() {
    exec = backend::make_host_executor({backend::HostLedger::create(256 * kMiB)});
    // Address space nobody uses, for the emulated GPU's window.
    void* p = mmap(nullptr, 64 * kMiB, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    window = (reinterpret_cast<uint64_t>(p) + 2 * kMiB - 1) & ~(2 * kMiB - 1);
    munmap(p, 64 * kMiB);
    EXPECT_TRUE(exec->va_reserve(0, window, 32 * kMiB).ok());
    EXPECT_TRUE(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) == 0);
  }
  ~Fixture() {
    close(sv[0]);
    close(sv[1]);
  }
  uint64_t alloc(uint64_t offset, uint64_t size, uint64_t stamp) {
    EXPECT_TRUE(exec->mem_map(0, window + offset, size).ok());
    stamps[window + offset] = stamp;
    return window + offset;
  }
  // Address space for imports: counted in `reserved` (what is still mapped).
  int reserved = 0;
  PeerImports::Hooks import_hooks() {
    PeerImports::Hooks hooks;
    hooks.reserve = [this](int, uint64_t, uint64_t size, uint64_t& addr) {
      void* p = mmap(nullptr, size, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
      munmap(p, size);  // free address space for the import to map at
      addr = reinterpret_cast<uint64_t>(p);
      ++reserved;
      return backend::Status::success();
    };
    hooks.unreserve = [this](int, uint64_t, uint64_t) { --reserved; };
    return hooks;
  }
  // 4 KiB at `a` exported and imported (GPU 0 to GPU 0) over the fixture's socket.
  bool import_rows(PeerExports& ex, PeerImports& im, uint64_t a) {
    PeerIpcMapRep rep;
    ex.map(*exec, rows(a, 4096), 5, 0, sv[0], rep);
    uint64_t addr = 0;
    std::string why;
    return im.apply(0, 0, 0, 4096, rep, sv[1], addr, why);
  }
  PeerExports::StampAt stamp_at() {
    return [this](int, uint64_t p) {
      for (auto& [base, st] : stamps)
        if (p >= base && p - base < 2 * kMiB) return st;
      return uint64_t{0};
    };
  }
};

}  // namespace

TEST(PeerIpc, ExportsLiveWithTheirAllocationAndAreToldWhenTheyGo) {
  Fixture f;
  const uint64_t a = f.alloc(0, 2 * kMiB, 5), b = f.alloc(4 * kMiB, 2 * kMiB, 6);
  PeerExports ex(f.stamp_at());
  PeerIpcMapRep r1;
  ex.map(*f.exec, rows(a + 100, 4096), 5, 0, f.sv[0], r1);
  ASSERT_EQ(r1.ipc, 1u);
  EXPECT_EQ(r1.fd_follows, 1u);
  EXPECT_EQ(r1.base, a);
  EXPECT_EQ(r1.size, 2 * kMiB);
  EXPECT_EQ(r1.offset, 100u);
  int fd = server::peer_ipc_recv_fd(f.sv[1]);
  ASSERT_GE(fd, 0);
  close(fd);
  // The same memory again: held by the importer, nothing sent.
  PeerIpcMapRep r2;
  ex.map(*f.exec, rows(a + 8192, 16), 5, 0, f.sv[0], r2);
  EXPECT_EQ(r2.ipc, 1u);
  EXPECT_EQ(r2.fd_follows, 0u);
  EXPECT_EQ(r2.offset, 8192u);
  EXPECT_TRUE(r2.drops.empty());
  // Another importer GPU gets its own descriptor.
  PeerIpcMapRep r3;
  ex.map(*f.exec, rows(a, 16), 5, 1, f.sv[0], r3);
  EXPECT_EQ(r3.fd_follows, 1u);
  close(server::peer_ipc_recv_fd(f.sv[1]));
  // A's allocation leaves the table (freed, maybe reallocated with a new stamp): the next answer
  // drops both of its exports; rows whose allocation is being freed (stamp 0) are not exported.
  f.stamps[a] = 9;
  PeerIpcMapRep r4;
  ex.map(*f.exec, rows(b, 64), 0, 0, f.sv[0], r4);
  EXPECT_EQ(r4.ipc, 0u);
  ASSERT_EQ(r4.drops.size(), 6u);
  EXPECT_EQ(r4.drops[2], a);
  EXPECT_EQ(r4.drops[5], a);
  // B exported, then forgotten by the importer: exported again.
  PeerIpcMapRep r5, r6;
  ex.map(*f.exec, rows(b, 64), 6, 0, f.sv[0], r5);
  EXPECT_EQ(r5.fd_follows, 1u);
  close(server::peer_ipc_recv_fd(f.sv[1]));
  ex.forget({0, 0, b});
  ex.map(*f.exec, rows(b, 64), 6, 0, f.sv[0], r6);
  EXPECT_EQ(r6.fd_follows, 1u);
  close(server::peer_ipc_recv_fd(f.sv[1]));
  // Rows that run past their mapping are not exported.
  PeerIpcMapRep r7;
  ex.map(*f.exec, rows(b + 2 * kMiB - 10, 20), 6, 0, f.sv[0], r7);
  EXPECT_EQ(r7.ipc, 0u);
}

TEST(PeerIpc, ImportsRefuseRowsOutsideTheirExportAndUnmapOnlyAtFlush) {
  Fixture f;
  const uint64_t a = f.alloc(0, 2 * kMiB, 5);
  std::memset(reinterpret_cast<void*>(a), 0x3c, 4096);
  PeerExports ex(f.stamp_at());
  PeerImports im(*f.exec, f.import_hooks());
  PeerIpcMapRep rep;
  ex.map(*f.exec, rows(a + 64, 4096), 5, 0, f.sv[0], rep);
  uint64_t addr = 0;
  std::string why;
  ASSERT_TRUE(im.apply(0, 0, 0, 4096, rep, f.sv[1], addr, why)) << why;
  EXPECT_EQ(f.reserved, 1);
  EXPECT_EQ(std::memcmp(reinterpret_cast<void*>(addr), reinterpret_cast<void*>(a + 64), 4096), 0);
  // Held: no descriptor; rows beyond the export are a broken peer.
  PeerIpcMapRep again = rep;
  again.fd_follows = 0;
  EXPECT_TRUE(im.apply(0, 0, 0, 4096, again, f.sv[1], addr, why));
  EXPECT_THROW(im.apply(0, 0, 0, 2 * kMiB, again, f.sv[1], addr, why), std::runtime_error);
  PeerIpcMapRep unasked;
  unasked.fd_follows = 1;
  EXPECT_THROW(im.apply(0, 0, 0, 16, unasked, f.sv[1], addr, why), std::runtime_error);
  // Memory the importer does not hold, without a descriptor: the pipeline, and told back.
  PeerIpcMapRep unknown = again;
  unknown.base = a + 4 * kMiB;
  EXPECT_FALSE(im.apply(0, 0, 0, 16, unknown, f.sv[1], addr, why));
  EXPECT_EQ(im.take_forgotten(), (std::vector<uint64_t>{0, 0, a + 4 * kMiB}));
  // A drop moves the import aside; only flush() unmaps it.
  PeerIpcMapRep dropped;
  dropped.drops = {0, 0, a};
  EXPECT_FALSE(im.apply(0, 0, 0, 16, dropped, f.sv[1], addr, why));
  EXPECT_EQ(f.reserved, 1);
  im.flush();
  EXPECT_EQ(f.reserved, 0);
}

// A direct copy notes its stream's use of an import without a CUDA call; the use's event is
// recorded when the import is to go (flush) or its stream is (stream_ending).  Until the stream
// is past the copy, nothing unmaps it.
TEST(PeerIpc, AnImportInUseStaysMappedUntilItsStreamsArePastIt) {
  Fixture f;
  const uint64_t a = f.alloc(0, 2 * kMiB, 5);
  PeerExports ex(f.stamp_at());
  PeerImports im(*f.exec, f.import_hooks());
  ASSERT_TRUE(f.import_rows(ex, im, a));
  uint64_t s1 = 0, s2 = 0;
  ASSERT_TRUE(f.exec->stream_create(0, 0, 0, s1).ok());
  ASSERT_TRUE(f.exec->stream_create(0, 0, 0, s2).ok());
  uint32_t gate1 = 0, gate2 = 0;
  PeerImports::Found found;
  ASSERT_TRUE(im.find(0, 0, a, 4096, found));
  // Stream 1: a copy, done, then (the use known) another one held behind a gate.
  im.note_use(found, s1);
  ASSERT_TRUE(f.exec->stream_synchronize(0, s1).ok());
  ASSERT_TRUE(f.exec->gate_wait(0, s1, &gate1, 1).ok());
  im.note_use(found, s1);
  // Stream 2: a copy held behind a gate, then the stream is destroyed (its work still runs, as
  // CUDA's does; the destroy returns at once, as CUDA's).
  ASSERT_TRUE(f.exec->gate_wait(0, s2, &gate2, 1).ok());
  im.note_use(found, s2);
  im.stream_ending(0, s2);
  ASSERT_TRUE(f.exec->stream_destroy(0, s2).ok());
  ASSERT_EQ(f.exec->stream_query(0, s2).code, 400);  // gone
  PeerIpcMapRep dropped;
  dropped.drops = {0, 0, a};
  uint64_t addr = 0;
  std::string why;
  EXPECT_FALSE(im.apply(0, 0, 0, 16, dropped, f.sv[1], addr, why));
  im.flush();
  EXPECT_EQ(f.reserved, 1) << "unmapped while streams 1 and 2 were before their copies";
  backend::open_gate(&gate1, 1);
  ASSERT_TRUE(f.exec->stream_synchronize(0, s1).ok());
  im.flush();
  EXPECT_EQ(f.reserved, 1) << "unmapped while the destroyed stream was before its copy";
  backend::open_gate(&gate2, 1);
  ASSERT_TRUE(f.exec->synchronize(0).ok());  // the destroyed stream's work too
  im.flush();
  EXPECT_EQ(f.reserved, 0) << "the destroyed stream's copy is done, yet the import stays";
  f.exec->stream_destroy(0, s1);
}

// A link that ends retires its imports; flush() unmaps them once the streams that copied through
// them are past it, though their uses were noted without a CUDA call (PeerCopier keeps ended
// links' imports for flush_unmaps: destroying them would leave used ones mapped for good).
TEST(PeerIpc, RetiredImportsAreUnmappedOnceTheirStreamsArePastThem) {
  Fixture f;
  const uint64_t a = f.alloc(0, 2 * kMiB, 5);
  PeerExports ex(f.stamp_at());
  PeerImports im(*f.exec, f.import_hooks());
  ASSERT_TRUE(f.import_rows(ex, im, a));
  uint64_t s = 0;
  ASSERT_TRUE(f.exec->stream_create(0, 0, 0, s).ok());
  PeerImports::Found found;
  ASSERT_TRUE(im.find(0, 0, a, 4096, found));
  im.note_use(found, s);
  ASSERT_TRUE(f.exec->stream_synchronize(0, s).ok());
  im.retire();
  EXPECT_FALSE(im.empty());
  for (int i = 0; i < 200 && !im.empty(); ++i) {
    im.flush();
    if (!im.empty()) std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  EXPECT_TRUE(im.empty());
  EXPECT_EQ(f.reserved, 0);
  f.exec->stream_destroy(0, s);
}
