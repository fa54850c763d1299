// NVML's library and system calls: initialisation (reference counted), error strings, versions.
#include <cstdio>

#include "frontend/nvml/nvml_state.h"
#include "frontend/nvml/nvml_text.h"

using namespace rgpu;
using namespace rgpu::nvml;

namespace {

const char* error_text(int r) {  // an int: a program may pass any number
  switch (r) {
    case NVML_SUCCESS:
      return "Success";
    case NVML_ERROR_UNINITIALIZED:
      return "Uninitialized";
    case NVML_ERROR_INVALID_ARGUMENT:
      return "Invalid Argument";
    case NVML_ERROR_NOT_SUPPORTED:
      return "Not Supported";
    case NVML_ERROR_NO_PERMISSION:
      return "Insufficient Permissions";
    case NVML_ERROR_ALREADY_INITIALIZED:
      return "Already Initialized";
    case NVML_ERROR_NOT_FOUND:
      return "Not Found";
    case NVML_ERROR_INSUFFICIENT_SIZE:
      return "Insufficient Size";
    case NVML_ERROR_INSUFFICIENT_POWER:
      return "Insufficient External Power";
    case NVML_ERROR_DRIVER_NOT_LOADED:
      return "Driver Not Loaded";
    case NVML_ERROR_TIMEOUT:
      return "Timeout";
    case NVML_ERROR_IRQ_ISSUE:
      return "Interrupt Request Issue";
    case NVML_ERROR_LIBRARY_NOT_FOUND:
      return "NVML Shared Library Not Found";
    case NVML_ERROR_FUNCTION_NOT_FOUND:
      return "Function Not Found";
    case NVML_ERROR_CORRUPTED_INFOROM:
      return "Corrupted infoROM";
    case NVML_ERROR_GPU_IS_LOST:
      return "GPU is lost";
    case NVML_ERROR_RESET_REQUIRED:
      return "GPU requires restart";
    case NVML_ERROR_OPERATING_SYSTEM:
      return "The operating system has blocked the request";
    case NVML_ERROR_LIB_RM_VERSION_MISMATCH:
      return "RM has detected an NVML/RM version mismatch";
    case NVML_ERROR_IN_USE:
      return "In use by another client";
    case NVML_ERROR_MEMORY:
      return "Insufficient Memory";
    case NVML_ERROR_NO_DATA:
      return "No data";
    case NVML_ERROR_VGPU_ECC_NOT_SUPPORTED:
      return "ECC is not supported on vGPU";
    case NVML_ERROR_INSUFFICIENT_RESOURCES:
      return "Insufficient resources";
    case NVML_ERROR_FREQ_NOT_SUPPORTED:
      return "Frequency not supported";
    case NVML_ERROR_ARGUMENT_VERSION_MISMATCH:
      return "Argument version mismatch";
    case NVML_ERROR_DEPRECATED:
      return "Deprecated";
    case NVML_ERROR_NOT_READY:
      return "Not ready";
    case NVML_ERROR_GPU_NOT_FOUND:
      return "GPU not found";
    case NVML_ERROR_INVALID_STATE:
      return "Invalid state";
    default:
      break;
  }
  if (r == kRgpuNvmlMarkerCode) return kRgpuNvmlMarker;  // rgpud asks
  return "Unknown Error";
}

}  // namespace

RGPU_NVML_API nvmlReturn_t nvmlInit_v2() { return State::get().init(); }
RGPU_NVML_API nvmlReturn_t nvmlInit() { return State::get().init(); }
RGPU_NVML_API nvmlReturn_t nvmlInitWithFlags(unsigned int) {
  // NO_GPUS / NO_ATTACH: nothing is attached at init anyway (links open at the first question).
  return State::get().init();
}
RGPU_NVML_API nvmlReturn_t nvmlShutdown() { return State::get().shutdown(); }
RGPU_NVML_API const char* nvmlErrorString(nvmlReturn_t r) {
  return error_text(static_cast<int>(r));
}

RGPU_NVML_API nvmlReturn_t nvmlSystemGetDriverVersion(char* version, unsigned int length) {
  if (!version) return NVML_ERROR_INVALID_ARGUMENT;
  proto::NvmlSystemRep s;
  if (nvmlReturn_t r = State::get().system(s); r != NVML_SUCCESS) return r;
  if (s.driver_version.empty()) return NVML_ERROR_NOT_SUPPORTED;  // the server has no driver
  return copy_out(s.driver_version, version, length) ? NVML_SUCCESS : NVML_ERROR_INSUFFICIENT_SIZE;
}

RGPU_NVML_API nvmlReturn_t nvmlSystemGetNVMLVersion(char* version, unsigned int length) {
  if (!version) return NVML_ERROR_INVALID_ARGUMENT;
  proto::NvmlSystemRep s;
  if (nvmlReturn_t r = State::get().system(s); r != NVML_SUCCESS) return r;
  if (s.nvml_version.empty()) return NVML_ERROR_NOT_SUPPORTED;  // the server has no NVML
  return copy_out(s.nvml_version, version, length) ? NVML_SUCCESS : NVML_ERROR_INSUFFICIENT_SIZE;
}

RGPU_NVML_API nvmlReturn_t nvmlSystemGetCudaDriverVersion_v2(int* version) {
  if (!version) return NVML_ERROR_INVALID_ARGUMENT;
  proto::NvmlSystemRep s;
  if (nvmlReturn_t r = State::get().system(s); r != NVML_SUCCESS) return r;
  if (s.cuda_driver_version <= 0) return NVML_ERROR_NOT_SUPPORTED;
  *version = s.cuda_driver_version;
  return NVML_SUCCESS;
}
RGPU_NVML_API nvmlReturn_t nvmlSystemGetCudaDriverVersion(int* version) {
  return nvmlSystemGetCudaDriverVersion_v2(version);
}
