// The generated table behind cuGetProcAddress.  This file does not include cuda.h: the table
// declares every exported name with one neutral prototype to take its address.
#include <cstring>

#include "frontend/cuda/proc_address.h"

#define RGPU_PROC_DECLS
#include "frontend/cuda/proc_table.inc"
#undef RGPU_PROC_DECLS

namespace rgpu::cuda_fe {

namespace {
struct Row {
  const char* name;
  int version;
  bool per_thread;
  void* fn;
};
const Row kRows[] = {
#include "frontend/cuda/proc_table.inc"
};
}  // namespace

void* find_proc(const char* name, int version, bool per_thread, ProcStatus* status) {
  const Row* best = nullptr;
  const Row* best_pt = nullptr;
  bool known = false;
  for (const Row& r : kRows) {
    if (std::strcmp(r.name, name) != 0) continue;
    known = true;
    if (r.version > version) continue;
    const Row*& slot = r.per_thread ? best_pt : best;
    if (!slot || r.version > slot->version) slot = &r;
  }
  if (per_thread && best_pt) best = best_pt;
  *status = best    ? ProcStatus::Found
            : known ? ProcStatus::VersionNotSufficient
                    : ProcStatus::SymbolNotFound;
  return best ? best->fn : nullptr;
}

}  // namespace rgpu::cuda_fe
