// rgpu bench --peer against two `rgpud --backend host` (small sizes): the relay through the client
// and the raw link must be measured; the server-to-server copy may be unsupported (then its rows
// say so) but must not fail the run.  A relay that fails does fail it.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <fstream>
#include <iterator>
#include <string>

#include "tests/integration/harness.h"

using namespace rgpu::test;

namespace {

TEST(BenchPeer, MeasuresRelayAndRawLinkBetweenTwoServers) {
  Daemon a, b;
  std::string json = "/tmp/rgpu-bench-peer-" + std::to_string(getpid()) + ".json";
  Env env = {{"RGPU_SERVERS", a.servers() + "/0," + b.servers() + "/0"}};
  Result r =
      run({RGPU_CLI_PATH, "bench", "--peer", "--max-size", "64KiB", "--json", json}, env, 300);
  EXPECT_EQ(r.status, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("relay (client)"), std::string::npos) << r.out;
  // Every size has a relay and a raw-link figure (4 B .. 64 KiB in powers of 4).
  for (const char* size : {"4 B ", "64 B ", "1 KiB ", "16 KiB ", "64 KiB "}) {
    size_t at = r.out.find(std::string("\n") + size);
    ASSERT_NE(at, std::string::npos) << size << r.out;
    std::string line = r.out.substr(at + 1, r.out.find('\n', at + 1) - at - 1);
    EXPECT_GE(std::count(line.begin(), line.end(), '/'), 2) << line;  // two "GB/s" at least
  }
  // The copy between servers: measured, or said to be unsupported.
  const bool unsupported = r.out.find("not supported") != std::string::npos;
  std::ifstream in(json);
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  EXPECT_NE(text.find("\"mode\": \"relay\""), std::string::npos) << text;
  EXPECT_NE(text.find("\"mode\": \"link\""), std::string::npos) << text;
  EXPECT_NE(text.find("\"op\": \"cross_lat\", \"bytes\": 4, \"mode\": \"relay\""),
            std::string::npos)
      << text;
  EXPECT_EQ(text.find("\"mode\": \"peer\"") == std::string::npos, unsupported) << text;
  unlink(json.c_str());
}

TEST(BenchPeer, FailsWhenTheRelayFails) {
  Daemon a;
  // The second server does not exist: the relay cannot reach it.
  Env env = {{"RGPU_SERVERS", a.servers() + "/0,127.0.0.1:1/0"}, {"RGPU_TIMEOUT", "3"}};
  Result r = run({RGPU_CLI_PATH, "bench", "--peer", "--max-size", "1KiB"}, env, 120);
  EXPECT_NE(r.status, 0) << r.out << r.err;
}

TEST(BenchPeer, NeedsTwoServers) {
  Daemon a;
  Env env = {{"RGPU_SERVERS", a.servers() + "/0," + a.servers() + "/1"}};
  Result r = run({RGPU_CLI_PATH, "bench", "--peer", "--max-size", "1KiB"}, env, 60);
  EXPECT_EQ(r.status, 2) << r.out << r.err;
  EXPECT_NE(r.err.find("two servers"), std::string::npos) << r.err;
}

}  // namespace
