// Module images a client sends, through a server Session with the host backend: crafted images are
// refused with cudaErrorInvalidKernelImage (or an allocation error) without a fault, are never
// written to the module cache, and the session keeps serving.  The module cache itself: size caps,
// least-recently-used eviction, and concurrent sessions (processes) storing at once.  Tenants:
// module variables and code count against the session's memory limit, images are priced from
// their headers, and decompression takes turns (the daemon's slots, across processes).
#include <dirent.h>
#include <gtest/gtest.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <iterator>
#include <thread>

#include "backend/host/host_executor.h"
#include "proto/auth.h"
#include "proto/frame.h"
#include "server/decompressions.h"
#include "server/session.h"
#include "tests/unit/image_builder.h"
#include "transport/tcp/tcp.h"

using namespace rgpu;
using namespace rgpu::proto;
using rgpu::test::CubinBuilder;
using rgpu::test::FatbinBuilder;

namespace {

constexpr int32_t kInvalidKernelImage = 200;

std::string temp_dir() {
  char path[] = "/tmp/rgpu-modcache-XXXXXX";
  EXPECT_NE(mkdtemp(path), nullptr);
  return path;
}

std::vector<std::string> files_in(const std::string& dir) {
  std::vector<std::string> out;
  if (DIR* d = opendir(dir.c_str())) {
    while (dirent* e = readdir(d))
      if (e->d_name[0] != '.') out.push_back(e->d_name);
    closedir(d);
  }
  std::sort(out.begin(), out.end());
  return out;
}

void remove_dir(const std::string& dir) {
  for (auto& f : files_in(dir)) unlink((dir + "/" + f).c_str());
  unlink((dir + "/.lock").c_str());
  rmdir(dir.c_str());
}

std::vector<uint8_t> valid_fatbin() {
  std::ifstream in(std::string(RGPU_FATBIN_DIR) + "/plain_ptx.fatbin", std::ios::binary);
  EXPECT_TRUE(in.good());
  return std::vector<uint8_t>(std::istreambuf_iterator<char>(in), {});
}

// A cubin with a __device__ variable of `size` bytes (no bytes in the file: .nv.global is NOBITS).
std::vector<uint8_t> fatbin_with_global(uint64_t size) {
  CubinBuilder c = rgpu::test::basic_cubin();
  uint32_t g = c.name("g_big");
  uint32_t home = c.add({".nv.global", CubinBuilder::kNobits, {}, size});
  uint32_t strtab = c.add({".strtab", CubinBuilder::kStrtab, c.strtab});
  auto sym = CubinBuilder::symbol(g, static_cast<uint16_t>(home), 0, size);
  c.add({".symtab", CubinBuilder::kSymtab, sym, UINT64_MAX, UINT64_MAX, strtab, 24});
  return FatbinBuilder::wrap(c.build());
}

class ModuleLoadTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = temp_dir();
    cache_ = std::make_unique<server::ModuleCache>(dir_);
    int fds[2];
    ASSERT_EQ(socketpair(AF_UNIX, SOCK_STREAM, 0, fds), 0);
    client_ = transport::tcp_adopt(fds[0], "test-client");
    server_conn_ = transport::tcp_adopt(fds[1], "test-server");
    ledger_ = backend::HostLedger::create(1ull << 30);
    thread_ = std::thread([this] {
      auto exec = backend::make_host_executor({ledger_});
      server::SessionConfig cfg{std::nullopt, "test"};
      cfg.module_cache = cache_.get();
      configure(cfg);
      server::Session s(*server_conn_, *exec, cfg);
      s.run();
      server_conn_->shutdown();
    });
    send_req<HelloMsg>(HelloReq{}, 1);
    HelloRep rep;
    ASSERT_EQ(reply(rep), 0) << msg_;
  }
  virtual void configure(server::SessionConfig&) {}
  void TearDown() override {
    if (client_) client_->shutdown();
    if (thread_.joinable()) thread_.join();
    remove_dir(dir_);
  }
  template <class M>
  void send_req(const typename M::Req& req, uint64_t id, const void* payload = nullptr,
                uint64_t len = 0) {
    std::vector<uint8_t> body = encode_message(req);
    FrameHeader h{static_cast<uint16_t>(M::id), 0, static_cast<uint32_t>(body.size()), id, len};
    uint8_t raw[kHeaderSize];
    encode_header(h, raw);
    iovec v[3] = {{raw, sizeof raw}, {body.data(), body.size()}, {const_cast<void*>(payload), len}};
    client_->send_all(v, 3);
  }
  template <class Rep>
  int32_t reply(Rep& rep) {
    for (;;) {
      uint8_t raw[kHeaderSize];
      client_->recv(raw, sizeof raw);
      FrameHeader h = decode_header(raw);
      std::vector<uint8_t> body(h.body_len);
      if (h.body_len) client_->recv(body.data(), body.size());
      // A slow load (a sanitizer build) may make the session say it is alive first.
      if (h.type == static_cast<uint16_t>(MsgId::Heartbeat) && !(h.flags & kFlagReply)) continue;
      EXPECT_TRUE(h.flags & kFlagReply);
      return decode_reply(body, rep, msg_);
    }
  }
  int32_t load(const std::vector<uint8_t>& image, ModuleRep& rep, std::vector<VarName> vars = {}) {
    ModuleLoadReq q;
    q.hash = sha256(image.data(), image.size());
    q.image_size = image.size();
    q.functions = {"k"};
    q.variables = std::move(vars);
    send_req<ModuleLoadMsg>(q, ++id_, image.data(), image.size());
    return reply(rep);
  }
  int32_t malloc_bytes(uint64_t size) {
    MallocRep rep;
    send_req<MallocMsg>(MallocReq{0, size, 0}, ++id_);
    return reply(rep);
  }
  void expect_alive() {
    Empty e;
    send_req<PingMsg>(PingReq{}, ++id_);
    EXPECT_EQ(reply(e), 0) << msg_;
  }

  std::string dir_, msg_;
  std::unique_ptr<server::ModuleCache> cache_;
  std::unique_ptr<transport::Connection> client_, server_conn_;
  backend::HostLedger* ledger_ = nullptr;
  std::thread thread_;
  uint64_t id_ = 1;
};

}  // namespace

TEST_F(ModuleLoadTest, CraftedImagesAreRefusedNotCachedAndTheSessionLivesOn) {
  std::vector<std::vector<uint8_t>> crafted;
  {  // A NOBITS .nv.info section with a wild offset.
    CubinBuilder c;
    c.add({".nv.info.k", CubinBuilder::kNobits, {}, 4096, 1ull << 40});
    crafted.push_back(FatbinBuilder::wrap(c.build()));
  }
  // A __device__ variable whose rounded size would overflow.
  crafted.push_back(fatbin_with_global(UINT64_MAX - 16));
  {  // A few hundred bytes declaring a terabyte, and more entries than allowed.
    FatbinBuilder b;
    b.entries.push_back({2, 90, 0x8000, std::vector<uint8_t>(200, 0x28), 1ull << 40});
    crafted.push_back(b.build());
    FatbinBuilder many;
    for (size_t i = 0; i <= fatbin::kMaxEntries; ++i) many.entries.push_back({7, 90, 0, {}, 0});
    crafted.push_back(many.build());
  }
  for (size_t i = 0; i < crafted.size(); ++i) {
    ModuleRep rep;
    EXPECT_EQ(load(crafted[i], rep), kInvalidKernelImage) << "image " << i << ": " << msg_;
    EXPECT_NE(msg_.find("cannot parse the fat binary"), std::string::npos) << msg_;
    expect_alive();
  }
  EXPECT_TRUE(files_in(dir_).empty()) << "a refused image reached the module cache";
  // A valid image still loads, and is cached.
  ModuleRep rep;
  EXPECT_EQ(load(valid_fatbin(), rep), 0) << msg_;
  EXPECT_EQ(files_in(dir_).size(), 1u);
}

TEST_F(ModuleLoadTest, AGlobalBeyondTheGpuIsAnAllocationErrorAndIsCharged) {
  // 8 GiB parses (within the parser's limit) but exceeds this GPU's 1 GiB.
  ModuleRep rep;
  EXPECT_EQ(load(fatbin_with_global(8ull << 30), rep), err::MemoryAllocation) << msg_;
  EXPECT_NE(msg_.find("globals"), std::string::npos) << msg_;
  expect_alive();
  // 64 MiB fits, is charged to the GPU's capacity, and is usable as a symbol.
  uint64_t before = ledger_->used();
  EXPECT_EQ(load(fatbin_with_global(64ull << 20), rep, {VarName{"g_big", 0}}), 0) << msg_;
  ASSERT_EQ(rep.variables.size(), 1u);
  EXPECT_TRUE(rep.variables[0].found);
  EXPECT_EQ(rep.variables[0].size, 64ull << 20);
  EXPECT_GE(ledger_->used() - before, 64ull << 20);
  std::vector<uint8_t> data(4096, 0x5a);
  Empty e;
  send_req<MemcpyHtoDMsg>(MemcpyHtoDReq{0, rep.variables[0].addr + (64ull << 20) - 4096, 4096},
                          ++id_, data.data(), data.size());
  EXPECT_EQ(reply(e), 0) << msg_;
  expect_alive();
}

// ---- the cache on its own ----

namespace {

std::vector<uint8_t> image_of(int seed, size_t size) {
  std::vector<uint8_t> v(size);
  for (size_t i = 0; i < size; ++i) v[i] = static_cast<uint8_t>(seed * 31 + i * 7);
  return v;
}

}  // namespace

TEST(ModuleCache, SizeCapsAndLeastRecentlyUsedEviction) {
  std::string dir = temp_dir();
  server::ModuleCache cache(dir, 4u << 20);  // 4 MiB: images up to 1 MiB
  EXPECT_EQ(cache.max_image_bytes(), 1u << 20);
  auto big = image_of(0, (1u << 20) + 1);
  cache.put(sha256(big.data(), big.size()), big);
  EXPECT_TRUE(files_in(dir).empty()) << "an image over the per-image cap was stored";
  auto wrong = image_of(1, 1000);
  cache.put(sha256("x", 1), wrong);
  EXPECT_TRUE(files_in(dir).empty()) << "an image not matching its hash was stored";

  std::vector<std::array<uint8_t, 32>> hashes;
  for (int i = 0; i < 4; ++i) {
    auto img = image_of(i, 900u << 10);
    hashes.push_back(sha256(img.data(), img.size()));
    cache.put(hashes.back(), img);
    usleep(20000);  // distinct modification times
  }
  EXPECT_EQ(files_in(dir).size(), 4u);
  ASSERT_NE(cache.get(hashes[0]), nullptr);  // image 0 is now the most recently used
  usleep(20000);
  auto img = image_of(9, 900u << 10);
  cache.put(sha256(img.data(), img.size()), img);  // 4.5 MiB > 4 MiB: one must go
  EXPECT_EQ(files_in(dir).size(), 4u);
  EXPECT_NE(cache.get(hashes[0]), nullptr);
  EXPECT_EQ(cache.get(hashes[1]), nullptr) << "the least recently used image was not evicted";
  EXPECT_NE(cache.get(hashes[2]), nullptr);
  EXPECT_NE(cache.get(hashes[3]), nullptr);
  // A file that no longer matches its name is ignored.
  std::string victim = dir + "/" + hex(hashes[2].data(), hashes[2].size()) + ".fatbin";
  { std::ofstream(victim, std::ios::binary | std::ios::trunc) << "tampered"; }
  EXPECT_EQ(cache.get(hashes[2]), nullptr);
  remove_dir(dir);
}

TEST(ModuleCache, ConcurrentProcessesNeverLeavePartialOrForeignFiles) {
  std::string dir = temp_dir();
  constexpr int kProcs = 6, kImages = 10;
  std::vector<pid_t> pids;
  for (int p = 0; p < kProcs; ++p) {
    pid_t pid = fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
      server::ModuleCache cache(dir, 8u << 20);
      bool ok = true;
      for (int i = 0; i < kImages; ++i) {
        auto img = image_of(i % 4 + p * 100 * (i % 2), 300u << 10);  // some shared by all
        auto h = sha256(img.data(), img.size());
        cache.put(h, img);
        server::Image back = cache.get(h);
        if (back && *back != img) ok = false;
      }
      _exit(ok ? 0 : 1);
    }
    pids.push_back(pid);
  }
  for (pid_t pid : pids) {
    int st = 0;
    ASSERT_EQ(waitpid(pid, &st, 0), pid);
    EXPECT_TRUE(WIFEXITED(st) && WEXITSTATUS(st) == 0);
  }
  uint64_t total = 0;
  for (const std::string& f : files_in(dir)) {
    EXPECT_EQ(f.find(".tmp."), std::string::npos) << "temporary file left: " << f;
    std::ifstream in(dir + "/" + f, std::ios::binary);
    std::vector<uint8_t> bytes(std::istreambuf_iterator<char>(in), {});
    total += bytes.size();
    auto h = sha256(bytes.data(), bytes.size());
    EXPECT_EQ(hex(h.data(), h.size()) + ".fatbin", f) << "a file does not match its name";
  }
  EXPECT_LE(total, 8u << 20);
  remove_dir(dir);
}

// ---- tenants (issue 36): module variables and code count against the session's quota, and
// decompression is budgeted per image and takes turns across sessions ----

namespace {

using Clock = std::chrono::steady_clock;

// A valid fat binary whose one cubin (sm_90, zstd) decompresses to about `bytes` (a section of
// zeros); `seed` makes images differ.
std::vector<uint8_t> inflating_fatbin(uint64_t bytes, uint8_t seed) {
  CubinBuilder c = rgpu::test::basic_cubin();
  std::vector<uint8_t> text(bytes, 0);
  text[0] = seed;
  c.add({".text.k", 1, std::move(text)});
  std::vector<uint8_t> cubin = c.build();
  FatbinBuilder b;
  b.entries.push_back({2, 90, 0x8000, rgpu::test::zstd_frame(cubin), cubin.size()});
  return b.build();
}

// 33 KB declaring 1 GiB: four 256 MiB entries of zeros (the bomb).
std::vector<uint8_t> bomb_fatbin() {
  FatbinBuilder b;
  auto zeros = rgpu::test::zstd_zeros(fatbin::kMaxEntryBytes);
  for (uint32_t arch : {90u, 80u, 75u, 70u})
    b.entries.push_back({2, arch, 0x8000, zeros, fatbin::kMaxEntryBytes});
  return b.build();
}

class ModuleQuotaTest : public ModuleLoadTest {
 protected:
  void configure(server::SessionConfig& c) override {
    c.mem_limit = 256ull << 20;
    c.decompressions = slots_;
    c.decompression_wait_ms = 300;
  }
  server::DecompressionSlots* slots_ = server::DecompressionSlots::create(1);
};

}  // namespace

TEST_F(ModuleQuotaTest, VariablesCountAgainstTheClientMemoryLimit) {
  // 900 MiB fits the GPU (1 GiB) but not the client's 256 MiB: refused at load, nothing held.
  ModuleRep rep;
  uint64_t before = ledger_->used();
  EXPECT_EQ(load(fatbin_with_global(900ull << 20), rep), err::MemoryAllocation) << msg_;
  EXPECT_NE(msg_.find("--client-mem-limit"), std::string::npos) << msg_;
  EXPECT_NE(msg_.find("variables take 943718400 bytes"), std::string::npos) << msg_;
  EXPECT_EQ(ledger_->used(), before);
  expect_alive();
  EXPECT_EQ(malloc_bytes(200ull << 20), 0) << msg_;  // the refused module holds nothing
  // With those 200 MiB allocated, modules with 1 and 50 MiB of variables leave 5 MiB.
  ModuleRep small;
  EXPECT_EQ(load(fatbin_with_global(1ull << 20), small), 0) << msg_;
  EXPECT_EQ(load(fatbin_with_global(50ull << 20), rep, {VarName{"g_big", 0}}), 0) << msg_;
  ASSERT_TRUE(rep.variables.at(0).found);
  EXPECT_EQ(malloc_bytes(8ull << 20), err::MemoryAllocation) << msg_;  // 200 + 1 + 50 + 8
  EXPECT_NE(msg_.find("--client-mem-limit"), std::string::npos) << msg_;
  EXPECT_NE(msg_.find("by module variables"), std::string::npos) << msg_;
  EXPECT_EQ(malloc_bytes(4ull << 20), 0) << msg_;
}

TEST_F(ModuleQuotaTest, DecompressedCodeCountsAgainstTheClientMemoryLimit) {
  // Four modules of 60 MiB of code each fit 256 MiB; a fifth does not, and is refused before it
  // is decompressed.
  ModuleRep rep;
  for (uint8_t i = 1; i <= 4; ++i)
    EXPECT_EQ(load(inflating_fatbin(60ull << 20, i), rep), 0) << int(i) << ": " << msg_;
  const std::vector<uint8_t> fifth = inflating_fatbin(60ull << 20, 5);
  // Refused from its headers: the time is hashing and sending 60 MiB, not inflating it (generous
  // for a sanitizer build on a loaded machine).
  auto start = Clock::now();
  EXPECT_EQ(load(fifth, rep), err::MemoryAllocation) << msg_;
  EXPECT_LT(Clock::now() - start, std::chrono::seconds(2));
  EXPECT_NE(msg_.find("bytes of code would exceed"), std::string::npos) << msg_;
  EXPECT_NE(msg_.find("--client-mem-limit"), std::string::npos) << msg_;
  EXPECT_EQ(slots_->in_use(), 0);
  expect_alive();
}

TEST_F(ModuleQuotaTest, ABombIsRefusedFromItsHeadersAtOnce) {
  std::vector<uint8_t> bomb = bomb_fatbin();
  ASSERT_LT(bomb.size(), 40u << 10);
  rusage u0{}, u1{};
  getrusage(RUSAGE_SELF, &u0);
  auto start = Clock::now();
  ModuleRep rep;
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(load(bomb, rep), err::MemoryAllocation) << msg_;
    EXPECT_NE(msg_.find("decompresses to 1073741824 bytes"), std::string::npos) << msg_;
    EXPECT_NE(msg_.find("--max-image-mb 64"), std::string::npos) << msg_;
  }
  EXPECT_LT(Clock::now() - start, std::chrono::milliseconds(500));
  getrusage(RUSAGE_SELF, &u1);
  EXPECT_LT(u1.ru_maxrss - u0.ru_maxrss, 32 << 10) << "KiB: something was decompressed";
  EXPECT_TRUE(files_in(dir_).empty()) << "a refused image reached the module cache";
  expect_alive();
}

TEST_F(ModuleQuotaTest, ALoadThatGetsNoDecompressionSlotFailsWithinItsWait) {
  // Another session (pid 1 here) holds the daemon's only slot.
  ASSERT_EQ(slots_->acquire(1, 0, 0, 0), 0);
  std::vector<uint8_t> compressed = inflating_fatbin(1 << 20, 1);
  ModuleRep rep;
  auto start = Clock::now();
  EXPECT_EQ(load(compressed, rep), err::MemoryAllocation) << msg_;
  auto waited = Clock::now() - start;
  EXPECT_GE(waited, std::chrono::milliseconds(250));
  EXPECT_LT(waited, std::chrono::seconds(3));
  EXPECT_NE(msg_.find("no decompression slot came free within 300 ms"), std::string::npos) << msg_;
  EXPECT_NE(msg_.find("--max-decompressions"), std::string::npos) << msg_;
  // An image with nothing to decompress needs no slot.
  EXPECT_EQ(load(fatbin_with_global(4096), rep), 0) << msg_;
  // Once the holder is gone (the daemon frees a dead session's slot), the load goes through.
  slots_->release_process(1);
  EXPECT_EQ(load(compressed, rep), 0) << msg_;
  EXPECT_EQ(slots_->in_use(), 0);
}

TEST(DecompressionSlots, WaitersTakeTurnsAcrossProcesses) {
  auto* slots = server::DecompressionSlots::create(2);
  ASSERT_NE(slots, nullptr);
  // Six processes hold a slot 100 ms each: never more than two at once, none starved.
  int pipefd[2];
  ASSERT_EQ(pipe(pipefd), 0);
  std::vector<pid_t> kids;
  auto now_us = [] {
    timespec ts{};
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return static_cast<int64_t>(ts.tv_sec) * 1000000 + ts.tv_nsec / 1000;
  };
  for (int i = 0; i < 6; ++i) {
    pid_t p = fork();
    if (p == 0) {
      int s = slots->acquire(getpid(), 0, 0, 10000);
      int64_t held[2] = {now_us(), 0};
      usleep(100000);
      held[1] = now_us();
      slots->release(s, getpid());
      if (s < 0) held[0] = held[1] = -1;
      _exit(write(pipefd[1], held, sizeof held) == sizeof held ? 0 : 1);
    }
    kids.push_back(p);
  }
  for (pid_t p : kids) waitpid(p, nullptr, 0);
  std::vector<std::pair<int64_t, int64_t>> spans(6);
  for (auto& sp : spans) {
    int64_t held[2];
    ASSERT_EQ(read(pipefd[0], held, sizeof held), static_cast<ssize_t>(sizeof held));
    ASSERT_GE(held[0], 0) << "a process got no slot within 10 s";
    sp = {held[0], held[1]};
  }
  for (const auto& a : spans) {  // at a's start, how many hold a slot (a included)
    int at_once = 0;
    for (const auto& b : spans) at_once += b.first <= a.first && a.first < b.second;
    EXPECT_LE(at_once, 2);
  }
  close(pipefd[0]);
  close(pipefd[1]);
  // A process that dies holding a slot leaks nothing once the daemon reaps it.
  pid_t p = fork();
  if (p == 0) {
    slots->acquire(getpid(), 0, 0, 0);
    _exit(0);  // without releasing it
  }
  waitpid(p, nullptr, 0);
  EXPECT_EQ(slots->in_use(), 1);
  EXPECT_EQ(slots->acquire(getpid(), 0, 0, 0), 1);
  EXPECT_EQ(slots->acquire(getpid() + 1, 0, 0, 50), -1);
  slots->release_process(p);
  EXPECT_EQ(slots->in_use(), 1);
  slots->release(1, getpid());
  EXPECT_EQ(slots->in_use(), 0);
}
