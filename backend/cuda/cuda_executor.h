// The cuda backend: executes on real GPUs through the driver API (one primary context per GPU,
// owned by the session process).
#pragma once

#include <memory>
#include <string>

#include "backend/executor.h"

namespace rgpu::backend {

// nullptr with `error` set when there is no driver or no GPU.
std::unique_ptr<Executor> make_cuda_executor(std::string& error);

}  // namespace rgpu::backend
