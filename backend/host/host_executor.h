// The host backend: a test double for machines without a GPU.  "Device memory" is host memory of
// the session process, charged against a capacity shared by all sessions (HostLedger), which
// cudaMemGetInfo reports.  Kernels are not run here (they come from a test plugin, later).
#pragma once

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "backend/executor.h"
#include "backend/host/host_kernel_api.h"
#include "backend/host/host_ledger.h"

namespace rgpu::backend {

// Host implementations of kernels, by mangled name (from a plugin: load_host_kernels).
using HostKernels = std::map<std::string, rgpu_host_kernel_fn>;

// Loads a kernel plugin; false with `error` set when it cannot.
bool load_host_kernels(const std::string& path, HostKernels& out, std::string& error);

// One ledger per emulated device; the ledgers and kernels must outlive the executor.
std::unique_ptr<Executor> make_host_executor(std::vector<HostLedger*> ledgers,
                                             const HostKernels* kernels = nullptr);

}  // namespace rgpu::backend
