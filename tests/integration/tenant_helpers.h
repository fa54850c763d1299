// What the hostile-tenant suites share (tenant_ipc, tenant_modules, tenant_users): crafted module
// images that are work to inflate, temporary files, the daemon's decompression-slot log, and the
// fields of tenant_ipc's summary line.
#pragma once

#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <fstream>
#include <iterator>
#include <regex>
#include <string>
#include <utility>
#include <vector>

#include "tests/unit/image_builder.h"

namespace rgpu::test {

// A file of the test's own, removed when it goes.
struct TempFile {
  std::string path;
  TempFile(const TempFile&) = delete;
  TempFile& operator=(const TempFile&) = delete;
  explicit TempFile(const std::vector<uint8_t>& bytes) {
    char tmpl[] = "/tmp/rgpu-image-XXXXXX";
    int fd = mkstemp(tmpl);
    path = tmpl;
    if (fd < 0 || write(fd, bytes.data(), bytes.size()) != static_cast<ssize_t>(bytes.size()))
      ADD_FAILURE() << "cannot write " << path;
    if (fd >= 0) close(fd);
  }
  ~TempFile() { unlink(path.c_str()); }
};

// A valid fat binary whose sm_90 cubin decompresses to `bytes` and more (a section of zeros
// after a kernel `k`): within the per-image budget, but work to inflate.
inline std::vector<uint8_t> inflating_fatbin(uint64_t bytes, uint8_t seed) {
  CubinBuilder c = basic_cubin();
  std::vector<uint8_t> text(bytes, 0);
  text[0] = seed;
  c.add({".text.k", 1, std::move(text)});
  std::vector<uint8_t> cubin = c.build();
  FatbinBuilder b;
  b.entries.push_back({2, 90, 0x8000, zstd_frame(cubin), cubin.size()});
  return b.build();
}

// The daemon's log: when each decompression slot was held (CLOCK_MONOTONIC microseconds).
inline std::vector<std::pair<long long, long long>> slot_spans(const std::string& log_file) {
  std::ifstream in(log_file);
  std::string log((std::istreambuf_iterator<char>(in)), {});
  std::vector<std::pair<long long, long long>> spans;
  std::regex re(R"(decompression slot \d+ of \d+ held (\d+)\.\.(\d+) us)");
  for (std::sregex_iterator it(log.begin(), log.end(), re), end; it != end; ++it)
    spans.push_back({std::stoll((*it)[1]), std::stoll((*it)[2])});
  return spans;
}

// The most spans that overlap at one moment.
inline int most_at_once(const std::vector<std::pair<long long, long long>>& spans) {
  int best = 0;
  for (const auto& a : spans) {
    int n = 0;
    for (const auto& b : spans) n += b.first <= a.first && a.first < b.second;
    best = std::max(best, n);
  }
  return best;
}

// "key=value" from tenant_ipc's summary line (values end at a space; reason= at the line's end).
inline std::string summary_field(const std::string& line, const std::string& key) {
  size_t at = line.find(" " + key + "=");
  if (at == std::string::npos) return "";
  at += key.size() + 2;
  if (key == "reason") return line.substr(at);
  return line.substr(at, line.find(' ', at) - at);
}

}  // namespace rgpu::test
