// rgpu bench: the same operations natively, through rgpu, and over the raw link, in one run.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace rgpu::cli {

int bench_main(int argc, char** argv, const char* lib_dir, const char* exe_dir);

// One measured row.
struct Result {
  std::string op;
  uint64_t bytes = 0;
  std::string mode;  // native, rgpu, link
  double value = 0;
  std::string unit;
  std::string transport;  // rgpu's: tcp or shm
};

// The row of `op` at `bytes` in `mode` (native, rgpu, link) over `transport`; null when absent.
const Result* find(const std::vector<Result>& rs, const std::string& op, uint64_t bytes,
                   const std::string& mode, const std::string& transport = "");
std::string human(uint64_t bytes);  // "4 B", "256 KiB", "1 GiB"
// A table cell: "-" for no row, else the value and its unit; ratio: a / b, "-" when either is
// missing.
std::string cell(const Result* r);
std::string ratio(const Result* a, const Result* b);

}  // namespace rgpu::cli
