// CUDA runtime error codes as rgpu uses them on the wire and in both libraries.  The numbers are
// cudaError_t's (equal to the driver's CUresult for every code rgpu produces); the full table of
// names and descriptions is generated from the CUDA 13 headers (cuda_error_table.inc).
#pragma once

#include <cstdint>

namespace rgpu {

using CudaError = int32_t;

namespace err {
constexpr CudaError Success = 0;
constexpr CudaError InvalidValue = 1;
constexpr CudaError MemoryAllocation = 2;
constexpr CudaError InitializationError = 3;
constexpr CudaError InvalidPitchValue = 12;
constexpr CudaError InvalidMemcpyDirection = 21;
constexpr CudaError InsufficientDriver = 35;
constexpr CudaError DevicesUnavailable = 46;
constexpr CudaError NoDevice = 100;
constexpr CudaError InvalidDevice = 101;
constexpr CudaError NotReady = 600;
constexpr CudaError IllegalAddress = 700;
constexpr CudaError HostMemoryAlreadyRegistered = 712;
constexpr CudaError HostMemoryNotRegistered = 713;
constexpr CudaError NotPermitted = 800;
constexpr CudaError NotSupported = 801;
constexpr CudaError Unknown = 999;
}  // namespace err

// "cudaErrorInvalidValue"; nullptr for a code CUDA 13 does not define.
const char* cuda_error_name(CudaError e);
// "invalid argument"; nullptr for an unknown code.
const char* cuda_error_string(CudaError e);

// Errors after which a CUDA context is unusable and every later call fails (CUDA's "sticky"
// errors).
bool cuda_error_is_sticky(CudaError e);

}  // namespace rgpu
