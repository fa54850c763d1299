// rgpu bench --emu against `rgpud --backend host` started with the same RGPU_NET_EMU: the rgpu
// rows over TCP and the raw link rows come again under emulation (transport "tcp+emu"), a round
// trip there costs at least the emulated rtt, and the plain rows of the same run stay plain (rgpud
// emulates only toward clients that emulate too).  A server that does not emulate the same is
// warned about and its emulated rgpu rows skipped; a bad spec is refused.
#include <gtest/gtest.h>
#include <unistd.h>

#include <fstream>
#include <iterator>
#include <regex>
#include <string>

#include "tests/integration/harness.h"

using namespace rgpu::test;

namespace {

std::string read_all(const std::string& path) {
  std::ifstream in(path);
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

// The value of the sync_call row of `mode` and `transport` in bench's JSON, or -1.
double sync_call(const std::string& json, const std::string& mode, std::string transport) {
  if (size_t plus = transport.find('+'); plus != std::string::npos) transport.insert(plus, "\\");
  std::regex entry(
      "\\{\"op\": \"sync_call\", \"bytes\": 0, \"mode\": \"" + mode +
      "\", \"value\": ([0-9.e+]+), \"unit\": \"us\"" +
      (transport.empty() ? std::string("\\}") : ", \"transport\": \"" + transport + "\"\\}"));
  std::smatch m;
  return std::regex_search(json, m, entry) ? std::stod(m[1]) : -1;
}

TEST(BenchEmu, ReportsPlainAndEmulatedRowsInOneRun) {
  const std::string log = "/tmp/rgpu-bench-emu-" + std::to_string(getpid()) + ".log";
  const std::string json = "/tmp/rgpu-bench-emu-" + std::to_string(getpid()) + ".json";
  {
    Daemon d({}, {{"RGPU_NET_EMU", "rtt=200us,gbps=10"}, {"RGPU_LOG", "notice"}}, log);
    Env env = {{"RGPU_SERVERS", d.servers()}};
    Result r = run({RGPU_CLI_PATH, "bench", "--no-app", "--max-size", "1KiB", "--emu",
                    "gbps=10,rtt=200us", "--json", json},
                   env, 300);
    EXPECT_EQ(r.status, 0) << r.out << r.err;
    EXPECT_NE(r.out.find("under network emulation (RGPU_NET_EMU=rtt=200us,gbps=10)"),
              std::string::npos)
        << r.out;
    EXPECT_NE(r.out.find("emulated link round trip"), std::string::npos) << r.out;
    const std::string text = read_all(json);
    const double emu = sync_call(text, "rgpu", "tcp+emu"),
                 link_emu = sync_call(text, "link", "tcp+emu");
    const double plain = sync_call(text, "rgpu", "tcp"), link = sync_call(text, "link", "");
    EXPECT_GE(emu, 200) << text;
    EXPECT_GE(link_emu, 200) << text;
    EXPECT_GT(plain, 0) << text;
    EXPECT_GT(link, 0) << text;
    EXPECT_LT(plain, emu) << text;  // the plain client was not emulated by the server
    EXPECT_NE(text.find("\"op\": \"h2d_pinned\", \"bytes\": 1024, \"mode\": \"rgpu\""),
              std::string::npos);
  }
  EXPECT_NE(read_all(log).find("network emulation (RGPU_NET_EMU): rtt=200us,gbps=10"),
            std::string::npos)
      << read_all(log);
  unlink(json.c_str());
  unlink(log.c_str());
}

TEST(BenchEmu, WarnsWhenTheServerDoesNotEmulateAndRefusesABadSpec) {
  Daemon d;
  const std::string json = "/tmp/rgpu-bench-emu-plain-" + std::to_string(getpid()) + ".json";
  Env env = {{"RGPU_SERVERS", d.servers()}};
  Result bad = run({RGPU_CLI_PATH, "bench", "--emu", "rtt=5parsecs"}, env, 60);
  EXPECT_EQ(bad.status, 2) << bad.err;
  EXPECT_NE(bad.err.find("\"rtt=5parsecs\""), std::string::npos) << bad.err;
  Result r = run(
      {RGPU_CLI_PATH, "bench", "--no-app", "--max-size", "4", "--emu", "rtt=100us", "--json", json},
      env, 300);
  EXPECT_EQ(r.status, 0) << r.out << r.err;
  EXPECT_NE(r.err.find("does not emulate"), std::string::npos) << r.err;
  EXPECT_NE(r.out.find("rgpu tcp+emu: skipped"), std::string::npos) << r.out;
  const std::string text = read_all(json);
  EXPECT_LT(sync_call(text, "rgpu", "tcp+emu"), 0) << text;    // skipped
  EXPECT_GE(sync_call(text, "link", "tcp+emu"), 100) << text;  // bench's own link still emulated
  unlink(json.c_str());
}

}  // namespace
