// The client core's error type.  It is API-neutral: front-ends map it to their own codes at their
// boundary (frontend/cudart/errors.cc: cudaError_t; the driver front-end, frontend/cuda/ (issue
// 12), implements `CUresult to_driver(client::Error)` there).  The numbers are the wire's
// (cudaError_t's, equal to CUresult for every code below), so the runtime's map is the identity
// and the driver's differs only for runtime-only codes (kInvalidSymbol, kInvalidDeviceFunction,
// kInvalidConfiguration: CUDA_ERROR_NOT_FOUND / CUDA_ERROR_INVALID_HANDLE / _INVALID_VALUE).
#pragma once

#include "common/cuda_errors.h"

namespace rgpu::client {

using Error = CudaError;

namespace errc {
using namespace rgpu::err;
constexpr Error InvalidConfiguration = 9;     // runtime only
constexpr Error InvalidSymbol = 13;           // runtime only
constexpr Error InvalidDeviceFunction = 98;   // runtime only
constexpr Error InvalidContext = 201;         // CUDA_ERROR_INVALID_CONTEXT
constexpr Error InvalidResourceHandle = 400;  // CUDA_ERROR_INVALID_HANDLE
constexpr Error NotFound = 500;               // cudaErrorSymbolNotFound / CUDA_ERROR_NOT_FOUND
constexpr Error PrimaryContextActive = 708;   // kept for front-ends; SetFlags no longer fails
constexpr Error ContextIsDestroyed = 709;
}  // namespace errc

}  // namespace rgpu::client
