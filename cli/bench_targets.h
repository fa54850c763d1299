// rgpu bench's targets, as ratios measured in the same run (issue 29's for latency, copies of
// every size, graph launches, start-up and small-call loops; docs/benchmarks.md).
#pragma once

#include <cstdint>
#include <vector>

#include "cli/bench.h"
#include "cli/bench_startup.h"

namespace rgpu::cli {

// Prints "targets (TCP):", "targets (shared memory, co-located):" and "targets (start-up and
// small calls):", one line each with the measured values, the ratio, the target and "met" or
// "MISSED".  `startup`: the start-up rows (null when skipped).
void print_targets(const std::vector<Result>& all, uint64_t max_bytes, const StartupRun* startup);

}  // namespace rgpu::cli
