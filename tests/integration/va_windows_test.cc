// Address windows: every virtual device's allocations lie in its own window, whatever server and
// GPU it names, so addresses are unique across servers (tests/cuda/va_windows.cu checks bytes,
// pointer attributes and frees; this checks where the addresses are).
#include <gtest/gtest.h>

#include <cstdlib>
#include <map>
#include <memory>
#include <sstream>

#include "tests/integration/harness.h"

using namespace rgpu::test;

namespace {

constexpr uint64_t kTiB = 1ull << 40;

// "addr <device> <pointer>" lines of va_windows, by device.
std::multimap<int, uint64_t> addresses(const std::string& out) {
  std::multimap<int, uint64_t> m;
  std::istringstream in(out);
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("addr ", 0) != 0) continue;
    std::istringstream f(line.substr(5));
    int dev = -1;
    std::string p;
    f >> dev >> p;
    m.emplace(dev, std::strtoull(p.c_str(), nullptr, 16));
  }
  return m;
}

// The client's layout: 1 TiB windows from `base`, skipping 0x550000000000..0x570000000000.
uint64_t window_of(uint64_t base, int dev) {
  uint64_t w = base;
  for (int i = 0;; w += kTiB) {
    if (w < 0x570000000000ull && w + kTiB > 0x550000000000ull) continue;
    if (i++ == dev) return w;
  }
}

void expect_in_windows(const Result& r, uint64_t base, int devices) {
  EXPECT_EQ(r.status, 0) << r.out << "\nstderr:\n" << r.err;
  EXPECT_EQ(r.out.find("FAIL"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("va_windows: passed"), std::string::npos) << r.out << r.err;
  auto m = addresses(r.out);
  EXPECT_EQ(m.size(), static_cast<size_t>(devices) * 3) << r.out;
  for (auto& [dev, p] : m) {
    EXPECT_GE(p, window_of(base, dev)) << "device " << dev;
    EXPECT_LT(p, window_of(base, dev) + kTiB) << "device " << dev;
  }
}

}  // namespace

TEST(AddressWindows, SixDevicesOnThreeServers) {
  std::vector<std::unique_ptr<Daemon>> d;
  std::string servers;
  for (int i = 0; i < 3; ++i) {
    d.push_back(std::make_unique<Daemon>(std::vector<std::string>{"--host-gpus", "2"}));
    for (int g = 0; g < 2; ++g)
      servers += (servers.empty() ? "" : ",") + d.back()->servers() + "/" + std::to_string(g);
  }
  Env env = d[0]->client_env();
  env["RGPU_SERVERS"] = servers;
  env["VA_WINDOWS_PRINT"] = "1";
  expect_in_windows(run({cuda_program("va_windows")}, env), 0x500000000000ull, 6);
  for (auto& x : d) EXPECT_TRUE(x->alive());
}

TEST(AddressWindows, TwoDevicesNamingOneGpuGetTwoWindows) {
  Daemon d({"--host-gpus", "2"});
  Env env = d.client_env();
  env["RGPU_SERVERS"] = d.servers() + "/1," + d.servers() + "/1," + d.servers() + "/0";
  env["VA_WINDOWS_PRINT"] = "1";
  expect_in_windows(run({cuda_program("va_windows")}, env), 0x500000000000ull, 3);
}

TEST(AddressWindows, BaseIsOverridable) {
  Daemon d({"--host-gpus", "2"});
  Env env = d.client_env();
  env["RGPU_SERVERS"] = d.servers() + "/0," + d.servers() + "/1";
  env["VA_WINDOWS_PRINT"] = "1";
  env["RGPU_VA_BASE"] = "0x480000000000";
  expect_in_windows(run({cuda_program("va_windows")}, env), 0x480000000000ull, 2);
}

TEST(AddressWindows, DevicesBeyondTheLimitAreRefused) {
  Daemon d({"--host-gpus", "2"});
  Env env = d.client_env();
  // One window of 1 TiB fits between 0x6f0000000000 and 0x700000000000.
  env["RGPU_SERVERS"] = d.servers() + "/0," + d.servers() + "/1";
  env["VA_WINDOWS_PRINT"] = "1";
  env["RGPU_VA_BASE"] = "0x6f0000000000";
  Result r = run({cuda_program("va_windows")}, env);
  expect_in_windows(r, 0x6f0000000000ull, 1);
  EXPECT_NE(r.err.find("only 1 address windows"), std::string::npos) << r.err;
  env["RGPU_VA_BASE"] = "0x123";  // not 2 MiB-aligned: refused, the default used
  r = run({cuda_program("va_windows")}, env);
  expect_in_windows(r, 0x500000000000ull, 2);
  EXPECT_NE(r.err.find("RGPU_VA_BASE=0x123"), std::string::npos) << r.err;
}
