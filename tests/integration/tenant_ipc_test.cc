// CUDA IPC between tenants of one rgpud (issue 36, items 2-4; host backend,
// tests/cuda/tenant_ipc.cu):
//   - one client's exports cannot take the descriptors the daemon needs for new clients (rgpud
//     under a 1024-descriptor limit, soft and hard): beyond --client-max-ipc-exports, or beyond
//     the daemon's descriptor budget, an export is refused naming the limit, and another client
//     still connects and works while the exporter holds everything it got;
//   - a handle made before cudaFree opens nothing once the memory is freed, even when the same
//     size is allocated again (at the same address or not), while the new buffer's handle works;
//   - an importer reaches the exported allocation only: not past its end, not the exporter's
//     neighbouring buffers in the same 2 MiB slab, and a buffer the exporter allocates after the
//     export never lies in the exported slab.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>

#include "tests/integration/harness.h"
#include "tests/integration/tenant_helpers.h"

using namespace rgpu::test;

namespace {

constexpr int kMaxFds = 1024;

std::string temp_dir() {
  char t[] = "/tmp/rgpu-tenant-ipc-XXXXXX";
  return mkdtemp(t) ? t : "";
}

std::string read_file(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

size_t count(const std::string& text, const std::string& what) {
  size_t n = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

// Another tenant connects and works while the exporter holds its exports.
void another_client_works(const Daemon& d) {
  for (const char* transport : {"tcp", "shm"}) {
    Env env = d.client_env();
    env["RGPU_TRANSPORT"] = transport;
    Result r = run({cuda_program("tenant_ipc"), "smoke"}, env, 60);
    EXPECT_EQ(r.status, 0) << transport << "\n" << r.out << r.err;
    EXPECT_NE(r.out.find("tenant_ipc smoke: passed"), std::string::npos) << r.out << r.err;
  }
}

struct Held {
  std::string line;
  int exported = -1, refused = -1;
};

Held hold(Child& exporter, int count) {
  Held h;
  EXPECT_TRUE(exporter.wait_line("holding ", 120, &h.line)) << "the exporter did not get going";
  h.exported = atoi(summary_field(h.line, "exported").c_str());
  h.refused = atoi(summary_field(h.line, "refused").c_str());
  EXPECT_EQ(h.exported + h.refused, count) << h.line;
  return h;
}

TEST(TenantIpc, ASessionKeepsAtMostItsCapOfExports) {
  const std::string dir = temp_dir(), log = dir + "/rgpud.log";
  Daemon d({"--client-max-ipc-exports", "100", "--max-sessions", "8"}, {}, log, kMaxFds);
  Child exporter = spawn({cuda_program("tenant_ipc"), "hold", "150", "256"}, d.client_env());
  Held h = hold(exporter, 150);
  EXPECT_EQ(h.exported, 100) << h.line;
  EXPECT_EQ(summary_field(h.line, "error"), "cudaErrorMemoryAllocation") << h.line;
  EXPECT_NE(summary_field(h.line, "reason").find("--client-max-ipc-exports 100"), std::string::npos)
      << h.line;
  // cudaFree ended one export: the next one fits.
  EXPECT_EQ(summary_field(h.line, "retry"), "cudaSuccess") << h.line;
  another_client_works(d);
  EXPECT_TRUE(d.alive());
  exporter.kill_and_wait(9);
  // Logged once for the session, not once per refusal.
  EXPECT_EQ(count(read_file(log), "IPC export refused"), 1u) << read_file(log);
  EXPECT_EQ(system(("rm -rf '" + dir + "'").c_str()), 0);
}

TEST(TenantIpc, ExportsLeaveTheDaemonDescriptorsForNewClients) {
  const std::string dir = temp_dir(), log = dir + "/rgpud.log";
  // No cap per session: the descriptor budget alone stands between the exporter and the limit.
  Daemon d({"--client-max-ipc-exports", "0"}, {}, log, kMaxFds);
  Child exporter = spawn({cuda_program("tenant_ipc"), "hold", "1100", "256"}, d.client_env());
  Held h = hold(exporter, 1100);
  EXPECT_GT(h.exported, 0) << h.line;
  EXPECT_LT(h.exported, kMaxFds) << h.line;
  EXPECT_EQ(summary_field(h.line, "error"), "cudaErrorMemoryAllocation") << h.line;
  EXPECT_NE(summary_field(h.line, "reason").find("descriptor limit 1024"), std::string::npos)
      << h.line;
  EXPECT_EQ(summary_field(h.line, "retry"), "cudaSuccess") << h.line;
  another_client_works(d);
  EXPECT_TRUE(d.alive());
  const std::string text = read_file(log);
  EXPECT_EQ(text.find("Too many open files"), std::string::npos) << text;
  EXPECT_EQ(count(text, "IPC export refused"), 1u) << text;
  exporter.kill_and_wait(9);
  EXPECT_EQ(system(("rm -rf '" + dir + "'").c_str()), 0);
}

// Parameter: the buffer size (a slab's block, and a large allocation's own mapping).
class TenantIpcSized : public ::testing::TestWithParam<size_t> {};

TEST_P(TenantIpcSized, AStaleHandleOpensNothing) {
  Daemon d;
  const std::string dir = temp_dir(), bytes = std::to_string(GetParam());
  Env env = d.client_env();
  Child exporter = spawn({cuda_program("tenant_ipc"), "stale-export", bytes, dir}, env);
  std::string line;
  ASSERT_TRUE(exporter.wait_line("handles ", 60, &line)) << "the exporter printed no handles";
  std::istringstream in(line.substr(8));
  std::string old_h, new_h;
  in >> old_h >> new_h;
  env["RGPU_LOG"] = "info";  // the server's reason
  Result imp = run({cuda_program("tenant_ipc"), "stale-import", bytes, old_h, new_h}, env, 60);
  EXPECT_EQ(imp.status, 0) << imp.out << imp.err;
  EXPECT_NE(imp.out.find("tenant_ipc stale-import: passed"), std::string::npos)
      << imp.out << imp.err;
  EXPECT_NE(imp.err.find("memory was freed"), std::string::npos) << imp.err;
  std::ofstream(dir + "/done") << "";
  ASSERT_TRUE(exporter.wait_line("tenant_ipc stale-export: ", 60, &line));
  EXPECT_NE(line.find("passed"), std::string::npos) << line;
  EXPECT_EQ(system(("rm -rf '" + dir + "'").c_str()), 0);
}

TEST_P(TenantIpcSized, AnImporterReachesOnlyTheExportedAllocation) {
  Daemon d;
  const std::string dir = temp_dir(), bytes = std::to_string(GetParam());
  Env env = d.client_env();
  Child exporter = spawn({cuda_program("tenant_ipc"), "bounds-export", bytes, dir}, env);
  std::string line;
  ASSERT_TRUE(exporter.wait_line("handle ", 60, &line)) << "the exporter printed no handle";
  std::istringstream in(line.substr(7));
  std::string h, dx, dy, dz;
  in >> h >> dx >> dy >> dz;
  Result imp = run({cuda_program("tenant_ipc"), "bounds-import", bytes, h, dx, dy, dz}, env, 60);
  EXPECT_EQ(imp.status, 0) << imp.out << imp.err;
  EXPECT_NE(imp.out.find("tenant_ipc bounds-import: passed"), std::string::npos)
      << imp.out << imp.err;
  std::ofstream(dir + "/done") << "";
  ASSERT_TRUE(exporter.wait_line("tenant_ipc bounds-export: ", 60, &line));
  EXPECT_NE(line.find("passed"), std::string::npos) << line;
  EXPECT_EQ(system(("rm -rf '" + dir + "'").c_str()), 0);
}

INSTANTIATE_TEST_SUITE_P(Sizes, TenantIpcSized, ::testing::Values(size_t{4096}, size_t{3} << 20),
                         [](const auto& info) {
                           return info.param < (1u << 20) ? std::string("Small")
                                                          : std::string("Large");
                         });

}  // namespace
