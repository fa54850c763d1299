#include "common/cuda_errors.h"

namespace rgpu {
namespace {

struct Row {
  CudaError code;
  const char* name;
  const char* text;
};

constexpr Row kRows[] = {
#define X(code, name, text) {code, name, text},
#include "common/cuda_error_table.inc"
#undef X
};

const Row* find(CudaError e) {
  for (const Row& r : kRows)
    if (r.code == e) return &r;
  return nullptr;
}

}  // namespace

const char* cuda_error_name(CudaError e) {
  const Row* r = find(e);
  return r ? r->name : nullptr;
}

const char* cuda_error_string(CudaError e) {
  const Row* r = find(e);
  return r ? r->text : nullptr;
}

bool cuda_error_is_sticky(CudaError e) {
  switch (e) {
    case 700:
    case 702:
    case 710:
    case 714:
    case 715:
    case 716:
    case 717:
    case 718:
    case 719:
    case 721:
    case 226:
    case 810:
    case 911:
      return true;
    default:
      return false;
  }
}

}  // namespace rgpu
