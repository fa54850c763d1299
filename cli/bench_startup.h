// rgpu bench's start-up and small-call rows (cli/bench_startup.cc): the time to the first kernel
// of a fresh process (cuBLAS's first SGEMM; PyTorch's first tensor when python3 can import
// torch), and the time and round trips per iteration of small-call loops (bench/loop_small.cu,
// bench/loop_thrust.cu), natively and through rgpu.
#pragma once

#include <string>
#include <vector>

namespace rgpu::cli {

struct StartupRow {
  std::string op;    // first_sgemm, first_sgemm_main, torch_first_tensor, loop_small, loop_thrust
  std::string mode;  // native or rgpu
  double value = 0;
  std::string unit;       // s, us/iter or rt/iter
  std::string transport;  // rgpu's: tcp or shm
};

struct StartupRun {
  std::vector<StartupRow> rows;
  std::vector<std::string> notes;  // what was skipped, and why
  bool ok = true;                  // false when a program failed (or answered wrongly)
};

// `native`: this machine has a GPU (the programs also run on NVIDIA's libraries from
// RGPU_CUDA_ROOT); `transports`: rgpu's, as the other rgpu rows (LD_LIBRARY_PATH=lib_dir).
StartupRun bench_startup(const char* exe_dir, const char* lib_dir, bool native,
                         const std::vector<std::string>& transports);
void print_startup_rows(const StartupRun& run);
// The row of `op` in `mode` over `transport` ("" natively) with `unit`; null when absent.
const StartupRow* find_row(const StartupRun& run, const std::string& op, const std::string& mode,
                           const std::string& transport, const std::string& unit);

}  // namespace rgpu::cli
