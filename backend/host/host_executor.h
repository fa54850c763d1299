// The host backend: a test double for machines without a GPU.  "Device memory" is host memory of
// the session process, charged against a capacity shared by all sessions (HostLedger), which
// cudaMemGetInfo reports.  Kernels are not run here (they come from a test plugin, later).
#pragma once

#include <memory>
#include <vector>

#include "backend/executor.h"
#include "backend/host/host_ledger.h"

namespace rgpu::backend {

// One ledger per emulated device; the ledgers must outlive the executor.
std::unique_ptr<Executor> make_host_executor(std::vector<HostLedger*> ledgers);

}  // namespace rgpu::backend
