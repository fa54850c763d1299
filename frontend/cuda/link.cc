// cuLink* (issue 12, drvlibs): the link state lives on the server, whose driver links; a file is
// read here and sent as data; the image cuLinkComplete returns stays valid until cuLinkDestroy and
// loads with cuModuleLoadData like any cubin.  JIT options are accepted and not applied, as for
// modules (log buffers are left empty).
#include <cstring>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "common/log.h"
#include "frontend/cuda/api.h"

using namespace rgpu;
using rgpu::cuda_fe::core;
using rgpu::cuda_fe::to_driver;
using LinkState = client::Client::LinkState;

namespace {

CUresult check_options(unsigned n, CUjit_option* options, void** values) {
  return n && (!options || !values) ? CUDA_ERROR_INVALID_VALUE : CUDA_SUCCESS;
}

CUresult create(unsigned n, CUjit_option* options, void** values, CUlinkState* out) {
  RGPU_INIT();
  if (!out) return CUDA_ERROR_INVALID_VALUE;
  if (CUresult r = check_options(n, options, values); r != CUDA_SUCCESS) return r;
  int dev = 0;
  if (CUresult r = to_driver(cuda_fe::current_device(&dev)); r != CUDA_SUCCESS) return r;
  LinkState* s = nullptr;
  if (CUresult r = to_driver(core().link_create(&s)); r != CUDA_SUCCESS) return r;
  *out = reinterpret_cast<CUlinkState>(s);
  return CUDA_SUCCESS;
}

CUresult add(CUlinkState state, CUjitInputType type, const void* data, size_t size,
             const char* name, unsigned n, CUjit_option* options, void** values) {
  RGPU_INIT();
  LinkState* s = core().link_of(state);
  if (!s) return CUDA_ERROR_INVALID_HANDLE;
  int t;
  std::memcpy(&t, &type, sizeof t);
  if (!data || size == 0 || t < CU_JIT_INPUT_CUBIN || t > CU_JIT_INPUT_NVVM)
    return CUDA_ERROR_INVALID_VALUE;
  if (CUresult r = check_options(n, options, values); r != CUDA_SUCCESS) return r;
  return to_driver(core().link_add(s, static_cast<uint32_t>(t), data, size, name ? name : ""));
}

CUresult add_file(CUlinkState state, CUjitInputType type, const char* path, unsigned n,
                  CUjit_option* options, void** values) {
  RGPU_INIT();
  if (!core().link_of(state)) return CUDA_ERROR_INVALID_HANDLE;
  if (!path) return CUDA_ERROR_INVALID_VALUE;
  std::ifstream f(path, std::ios::binary);
  if (!f) {
    LOG_ERROR("cuLinkAddFile: cannot open %s", path);
    return CUDA_ERROR_FILE_NOT_FOUND;
  }
  std::vector<char> bytes((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  if (f.bad()) {
    LOG_ERROR("cuLinkAddFile: cannot read %s", path);
    return CUDA_ERROR_FILE_NOT_FOUND;
  }
  if (type == CU_JIT_INPUT_PTX) bytes.push_back('\0');  // PTX text as cuLinkAddData takes it
  return add(state, type, bytes.data(), bytes.size(), path, n, options, values);
}

}  // namespace

RGPU_CU CUresult cuLinkCreate_v2(unsigned int numOptions, CUjit_option* options,
                                 void** optionValues, CUlinkState* stateOut) {
  return create(numOptions, options, optionValues, stateOut);
}
RGPU_CU CUresult cuLinkAddData_v2(CUlinkState state, CUjitInputType type, void* data, size_t size,
                                  const char* name, unsigned int numOptions, CUjit_option* options,
                                  void** optionValues) {
  return add(state, type, data, size, name, numOptions, options, optionValues);
}
RGPU_CU CUresult cuLinkAddFile_v2(CUlinkState state, CUjitInputType type, const char* path,
                                  unsigned int numOptions, CUjit_option* options,
                                  void** optionValues) {
  return add_file(state, type, path, numOptions, options, optionValues);
}
// The first versions take the same arguments.
#undef cuLinkCreate
#undef cuLinkAddData
#undef cuLinkAddFile
RGPU_CU CUresult cuLinkCreate(unsigned int numOptions, CUjit_option* options, void** optionValues,
                              CUlinkState* stateOut) {
  return create(numOptions, options, optionValues, stateOut);
}
RGPU_CU CUresult cuLinkAddData(CUlinkState state, CUjitInputType type, void* data, size_t size,
                               const char* name, unsigned int numOptions, CUjit_option* options,
                               void** optionValues) {
  return add(state, type, data, size, name, numOptions, options, optionValues);
}
RGPU_CU CUresult cuLinkAddFile(CUlinkState state, CUjitInputType type, const char* path,
                               unsigned int numOptions, CUjit_option* options,
                               void** optionValues) {
  return add_file(state, type, path, numOptions, options, optionValues);
}

RGPU_CU CUresult cuLinkComplete(CUlinkState state, void** cubinOut, size_t* sizeOut) {
  RGPU_INIT();
  LinkState* s = core().link_of(state);
  if (!s) return CUDA_ERROR_INVALID_HANDLE;
  if (!cubinOut || !sizeOut) return CUDA_ERROR_INVALID_VALUE;
  const void* image = nullptr;
  size_t size = 0;
  if (CUresult r = to_driver(core().link_complete(s, &image, &size)); r != CUDA_SUCCESS) return r;
  *cubinOut = const_cast<void*>(image);
  *sizeOut = size;
  return CUDA_SUCCESS;
}

RGPU_CU CUresult cuLinkDestroy(CUlinkState state) {
  RGPU_INIT();
  LinkState* s = core().link_of(state);
  if (!s) return CUDA_ERROR_INVALID_HANDLE;
  return to_driver(core().link_destroy(s));
}
