// Tenants and modules (issue 36, items 5 and 6), through rgpud on the host backend: a module's
// variables and code count against --client-mem-limit like cudaMalloc's memory, and crafted,
// highly compressible module images cost the daemon only what its budgets allow: refused from
// their headers at once (--max-image-mb), or decompressed one slot at a time across sessions
// (--max-decompressions), never all at once.
#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <memory>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

#include "tests/integration/harness.h"
#include "tests/integration/tenant_helpers.h"
#include "tests/unit/image_builder.h"

using namespace rgpu::test;

namespace {

using Clock = std::chrono::steady_clock;

bool contains(const std::string& hay, const std::string& needle) {
  return hay.find(needle) != std::string::npos;
}

// 33 KB declaring 1 GiB: four 256 MiB entries of zeros, each the most one entry may declare.
std::vector<uint8_t> bomb_fatbin() {
  FatbinBuilder b;
  const uint64_t entry = 256ull << 20;
  auto zeros = zstd_zeros(entry);
  for (uint32_t arch : {90u, 80u, 75u, 70u}) b.entries.push_back({2, arch, 0x8000, zeros, entry});
  return b.build();
}

// "load <file> <CUresult> <ms>" lines of load_module's output.
struct Load {
  std::string result;
  long ms = -1;
};
std::vector<Load> loads(const std::string& out) {
  std::vector<Load> v;
  std::istringstream in(out);
  std::string word, file;
  while (in >> word)
    if (word == "load") {
      Load l;
      in >> file >> l.result >> l.ms;
      v.push_back(l);
    }
  return v;
}

}  // namespace

TEST(TenantModules, AModuleWhoseVariablesExceedTheLimitIsRefusedAtLoad) {
  // module_globals' module holds a 900 MiB __device__ array.
  Daemon d({"--client-mem-limit", "256MiB"});
  Env env = d.client_env();
  env["RGPU_LOG"] = "info";
  Result r = run({cuda_program("module_globals"), "load", "200"}, env);
  EXPECT_TRUE(contains(r.out, "symbol cudaErrorMemoryAllocation")) << r.out << r.err;
  EXPECT_TRUE(contains(r.err, "--client-mem-limit")) << r.err;
  EXPECT_TRUE(contains(r.err, "loading a module whose variables take")) << r.err;
  EXPECT_TRUE(contains(r.out, "malloc 200 cudaSuccess")) << r.out;  // nothing was held
  // A module with small variables loads under the same limit, through the runtime and the
  // driver API.
  r = run({cuda_program("kernels_symbols")}, env);
  EXPECT_EQ(r.status, 0) << r.out << r.err;
  CubinBuilder c = basic_cubin();
  c.add({".nv.global", CubinBuilder::kNobits, {}, 1u << 20});
  TempFile small(FatbinBuilder::wrap(c.build()));
  r = run({cuda_program("load_module"), small.path}, env);
  ASSERT_EQ(loads(r.out).size(), 1u) << r.out << r.err;
  EXPECT_EQ(loads(r.out)[0].result, "CUDA_SUCCESS") << r.err;
}

TEST(TenantModules, CudaMallocAfterABigModuleSeesLessQuota) {
  Daemon d({"--client-mem-limit", "1GiB"});
  Env env = d.client_env();
  env["RGPU_LOG"] = "info";
  Result r = run({cuda_program("module_globals"), "noload", "200"}, env);
  EXPECT_TRUE(contains(r.out, "malloc 200 cudaSuccess")) << r.out << r.err;
  // With the module's 900 MiB loaded, 200 MiB more would exceed 1 GiB; 100 MiB still fits.
  r = run({cuda_program("module_globals"), "load", "200", "100"}, env);
  EXPECT_TRUE(contains(r.out, "symbol cudaSuccess")) << r.out << r.err;
  EXPECT_TRUE(contains(r.out, "malloc 200 cudaErrorMemoryAllocation")) << r.out;
  EXPECT_TRUE(contains(r.out, "malloc 100 cudaSuccess")) << r.out;
  EXPECT_TRUE(contains(r.err, "by module variables")) << r.err;
}

TEST(TenantModules, DecompressedCodeCountsAgainstTheLimit) {
  Daemon d({"--client-mem-limit", "100MiB"});
  TempFile a(inflating_fatbin(40ull << 20, 1)), b(inflating_fatbin(40ull << 20, 2)),
      c(inflating_fatbin(40ull << 20, 3));
  Env env = d.client_env();
  env["RGPU_LOG"] = "info";
  Result r = run({cuda_program("load_module"), a.path, b.path, c.path}, env);
  std::vector<Load> l = loads(r.out);
  ASSERT_EQ(l.size(), 3u) << r.out << r.err;
  EXPECT_EQ(l[0].result, "CUDA_SUCCESS") << r.err;
  EXPECT_EQ(l[1].result, "CUDA_SUCCESS") << r.err;
  EXPECT_EQ(l[2].result, "CUDA_ERROR_OUT_OF_MEMORY") << r.err;  // 3 x 40 MiB > 100 MiB
  EXPECT_TRUE(contains(r.err, "bytes of code would exceed")) << r.err;
  EXPECT_TRUE(contains(r.err, "--client-mem-limit")) << r.err;
}

TEST(TenantModules, ConcurrentBombsAreRefusedFromTheirHeadersAtOnce) {
  // The bomb: 33 KB that cost 1.28 GiB and 22 s per load.  Eight clients send it at once;
  // each is refused in well under a second, and the daemon serves on.
  Daemon d;
  std::vector<uint8_t> bomb = bomb_fatbin();
  ASSERT_LT(bomb.size(), 40u << 10);
  TempFile f(bomb);
  Env env = d.client_env();
  env["RGPU_LOG"] = "info";
  auto start = Clock::now();
  std::vector<Child> clients;
  for (int i = 0; i < 8; ++i)
    clients.push_back(spawn({cuda_program("load_module"), f.path, f.path}, env));
  for (Child& c : clients) {
    std::string line;
    for (int k = 0; k < 2; ++k) {
      ASSERT_TRUE(c.wait_line("load ", 30, &line)) << "a client got no answer";
      std::vector<Load> l = loads(line);
      ASSERT_EQ(l.size(), 1u) << line;
      EXPECT_EQ(l[0].result, "CUDA_ERROR_OUT_OF_MEMORY") << line;
      EXPECT_LT(l[0].ms, 1000) << line;
    }
  }
  EXPECT_LT(Clock::now() - start, std::chrono::seconds(20));
  EXPECT_TRUE(d.alive());
  // The reason names the limit.
  Result r = run({cuda_program("load_module"), f.path}, env);
  EXPECT_TRUE(contains(r.err, "--max-image-mb")) << r.err;
  EXPECT_TRUE(contains(r.err, "decompresses to 1073741824 bytes")) << r.err;
}

TEST(TenantModules, ConcurrentDecompressionsTakeTurnsAcrossSessions) {
  // Six clients at once load images that each inflate to 40 MiB (within the per-image budget):
  // with --max-decompressions 1, the daemon's log shows the six decompressions one after another.
  char log_tmpl[] = "/tmp/rgpud-log-XXXXXX";
  int fd = mkstemp(log_tmpl);
  ASSERT_GE(fd, 0);
  close(fd);
  const std::string log_file = log_tmpl;
  {
    Daemon d({"--max-decompressions", "1"}, {{"RGPU_LOG", "info"}}, log_file);
    std::vector<std::unique_ptr<TempFile>> images;
    for (uint8_t i = 1; i <= 6; ++i)
      images.push_back(std::make_unique<TempFile>(inflating_fatbin(40ull << 20, i)));
    std::vector<Child> clients;
    for (const auto& img : images)
      clients.push_back(spawn({cuda_program("load_module"), img->path}, d.client_env()));
    for (Child& c : clients) {
      std::string line;
      ASSERT_TRUE(c.wait_line("load ", 60, &line));
      ASSERT_EQ(loads(line).size(), 1u) << line;
      EXPECT_EQ(loads(line)[0].result, "CUDA_SUCCESS") << line;
    }
  }
  auto spans = slot_spans(log_file);
  unlink(log_file.c_str());
  EXPECT_EQ(spans.size(), 6u) << "every load took a decompression slot";
  EXPECT_EQ(most_at_once(spans), 1) << "decompressions overlapped";
}
