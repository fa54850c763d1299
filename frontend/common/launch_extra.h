// A launch's `extra` array (CU_LAUNCH_PARAM_BUFFER_POINTER, buffer, CU_LAUNCH_PARAM_BUFFER_SIZE,
// &size, CU_LAUNCH_PARAM_END) turned into argument pointers, one per kernel parameter, pointing
// into the buffer at each parameter's offset (the server's layout of the function). Shared by
// cuLaunchKernel and kernel graph nodes of both front-ends (cudaKernelNodeParams::extra has the
// same form); header-only, so each library compiles its own copy and no symbol is shared.
#pragma once

#include <cuda.h>

#include <algorithm>
#include <cstring>
#include <vector>

#include "client/client.h"
#include "common/log.h"

namespace rgpu::frontend {

// `params` when `extra` is null; otherwise pointers into the buffer, kept in `out`. False (the
// call answers invalid value) for both given, a malformed array, or a buffer too small for the
// function's parameters -- unless `padded` is given: then a short buffer is copied into it,
// zero-filled to the parameters' size (CUDA's cuGraphAddKernelNode takes a short buffer).
inline bool launch_arguments(client::Function* f, void** params, void** extra,
                             std::vector<void*>& out, void*** args, const char* call,
                             std::vector<char>* padded = nullptr) {
  if (params && extra) return false;
  if (!extra) {
    *args = params;
    return true;
  }
  char* buffer = nullptr;
  size_t size = 0;
  bool have_size = false;
  for (size_t i = 0; extra[i] != CU_LAUNCH_PARAM_END; i += 2) {
    if (extra[i] == CU_LAUNCH_PARAM_BUFFER_POINTER) {
      buffer = static_cast<char*>(extra[i + 1]);
    } else if (extra[i] == CU_LAUNCH_PARAM_BUFFER_SIZE) {
      if (!extra[i + 1]) return false;
      size = *static_cast<size_t*>(extra[i + 1]);
      have_size = true;
    } else {
      return false;
    }
  }
  if (!buffer || !have_size) return false;
  // One pass over the layout: offsets first (kept in `out`), pointers once the buffer is known.
  out.clear();
  size_t needed = 0;
  for (size_t i = 0;; ++i) {
    size_t offset = 0, psize = 0;
    if (client::Client::get().param_info(f, i, &offset, &psize) != err::Success) break;
    out.push_back(reinterpret_cast<void*>(offset));
    needed = std::max(needed, offset + psize);
  }
  if (needed > size) {
    if (!padded) {
      LOG_ERROR("%s: the `extra` buffer holds %zu bytes; the parameters of %s need %zu", call, size,
                f->name.c_str(), needed);
      return false;
    }
    padded->assign(needed, 0);
    memcpy(padded->data(), buffer, size);
    buffer = padded->data();
  }
  for (void*& p : out) p = buffer + reinterpret_cast<size_t>(p);
  *args = out.data();
  return true;
}

}  // namespace rgpu::frontend
