// Per-user limits (issue 36), through rgpud on the host backend: what one user's sessions hold
// together (device memory, CUDA IPC exports, decompression slots) is bounded across the sessions,
// refused by the option's name, given back when a session ends, and never charged to another
// user.  A user is what --max-sessions-per-user counts by: a TCP client's address, a
// shared-memory client's uid, so the two transports of one test are two users.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "tests/integration/harness.h"
#include "tests/integration/tenant_helpers.h"
#include "tests/unit/image_builder.h"

using namespace rgpu::test;

namespace {

bool contains(const std::string& hay, const std::string& needle) {
  return hay.find(needle) != std::string::npos;
}

Env over(const Daemon& d, const char* transport) {
  Env env = d.client_env();
  env["RGPU_TRANSPORT"] = transport;
  env["RGPU_LOG"] = "info";
  return env;
}

TEST(TenantUsers, OneUsersSessionsShareTheMemoryLimit) {
  Daemon d({"--mem-limit-per-user", "400MiB"});
  Child holder = spawn({cuda_program("hold_memory"), "300"}, over(d, "tcp"));
  ASSERT_TRUE(holder.wait_line("holding", 60)) << "the first session got no memory";
  // Another session of the same user: 200 MiB more would make 500 MiB.
  Result r = run({cuda_program("hold_memory"), "200"}, over(d, "tcp"), 60);
  EXPECT_NE(r.status, 0) << r.out;
  EXPECT_TRUE(contains(r.out + r.err, "--mem-limit-per-user")) << r.out << r.err;
  EXPECT_TRUE(contains(r.out + r.err, "the user's 2 sessions hold")) << r.out << r.err;
  // 100 MiB still fits; and another user (shared memory: a uid, not an address) is not charged.
  Child small = spawn({cuda_program("hold_memory"), "100"}, over(d, "tcp"));
  EXPECT_TRUE(small.wait_line("holding", 60)) << "the user's last 100 MiB were refused";
  Child other = spawn({cuda_program("hold_memory"), "390"}, over(d, "shm"));
  EXPECT_TRUE(other.wait_line("holding", 60)) << "another user was charged";
  small.kill_and_wait(9);
  // The holder ends: what it held goes back to its user.
  holder.kill_and_wait(9);
  bool held = false;
  for (int i = 0; i < 50 && !held; ++i) {
    Child again = spawn({cuda_program("hold_memory"), "350"}, over(d, "tcp"));
    held = again.wait_line("holding", 30);
    again.kill_and_wait(9);
    if (!held) usleep(100000);  // the daemon reaps the session first
  }
  EXPECT_TRUE(held) << "the ended session's memory stayed charged to its user";
  other.kill_and_wait(9);
  EXPECT_TRUE(d.alive());
}

TEST(TenantUsers, OneUsersSessionsShareTheIpcExportLimit) {
  Daemon d({"--max-ipc-exports-per-user", "60", "--client-max-ipc-exports", "100"});
  Child first = spawn({cuda_program("tenant_ipc"), "hold", "40", "4096"}, over(d, "tcp"));
  std::string line;
  ASSERT_TRUE(first.wait_line("holding ", 120, &line));
  EXPECT_EQ(summary_field(line, "exported"), "40") << line;
  Child second = spawn({cuda_program("tenant_ipc"), "hold", "40", "4096"}, over(d, "tcp"));
  ASSERT_TRUE(second.wait_line("holding ", 120, &line));
  EXPECT_EQ(summary_field(line, "exported"), "20") << line;
  EXPECT_EQ(summary_field(line, "error"), "cudaErrorMemoryAllocation") << line;
  EXPECT_TRUE(contains(summary_field(line, "reason"), "--max-ipc-exports-per-user 60")) << line;
  EXPECT_EQ(summary_field(line, "retry"), "cudaSuccess") << line;  // a freed buffer's export went
  // Another user keeps its own count.
  Child other = spawn({cuda_program("tenant_ipc"), "hold", "40", "4096"}, over(d, "shm"));
  ASSERT_TRUE(other.wait_line("holding ", 120, &line));
  EXPECT_EQ(summary_field(line, "exported"), "40") << line;
  for (Child* c : {&first, &second, &other}) c->kill_and_wait(9);
  EXPECT_TRUE(d.alive());
}

TEST(TenantUsers, OneUserDecompressesAtMostItsShareAtOnce) {
  // Six sessions of one user load images that each inflate to 40 MiB, with four slots on the
  // daemon and a share of one per user: the daemon's log shows them one after another.
  char log_tmpl[] = "/tmp/rgpud-log-XXXXXX";
  int fd = mkstemp(log_tmpl);
  ASSERT_GE(fd, 0);
  close(fd);
  const std::string log_file = log_tmpl;
  {
    Daemon d({"--max-decompressions", "4", "--max-decompressions-per-user", "1"},
             {{"RGPU_LOG", "info"}}, log_file);
    std::vector<std::unique_ptr<TempFile>> images;
    for (uint8_t i = 1; i <= 6; ++i)
      images.push_back(std::make_unique<TempFile>(inflating_fatbin(40ull << 20, i)));
    std::vector<Child> clients;
    for (const auto& img : images)
      clients.push_back(spawn({cuda_program("load_module"), img->path}, over(d, "tcp")));
    for (Child& c : clients) {
      std::string line;
      ASSERT_TRUE(c.wait_line("load ", 60, &line));
      EXPECT_TRUE(contains(line, "CUDA_SUCCESS")) << line;
    }
  }
  auto spans = slot_spans(log_file);
  unlink(log_file.c_str());
  EXPECT_EQ(spans.size(), 6u) << "every load took a decompression slot";
  EXPECT_EQ(most_at_once(spans), 1) << "one user's decompressions overlapped";
}

}  // namespace
