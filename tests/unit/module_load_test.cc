// Module images a client sends, through a server Session with the host backend: crafted images are
// refused with cudaErrorInvalidKernelImage (or an allocation error) without a fault, are never
// written to the module cache, and the session keeps serving.  The module cache itself: size caps,
// least-recently-used eviction, and concurrent sessions (processes) storing at once.
#include <dirent.h>
#include <gtest/gtest.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fstream>
#include <iterator>
#include <thread>

#include "backend/host/host_executor.h"
#include "proto/auth.h"
#include "proto/frame.h"
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
      server::Session s(*server_conn_, *exec, cfg);
      s.run();
      server_conn_->shutdown();
    });
    send_req<HelloMsg>(HelloReq{}, 1);
    HelloRep rep;
    ASSERT_EQ(reply(rep), 0) << msg_;
  }
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
    uint8_t raw[kHeaderSize];
    client_->recv(raw, sizeof raw);
    FrameHeader h = decode_header(raw);
    std::vector<uint8_t> body(h.body_len);
    if (h.body_len) client_->recv(body.data(), body.size());
    EXPECT_TRUE(h.flags & kFlagReply);
    return decode_reply(body, rep, msg_);
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
