// cuGetProcAddress's table: which exported function answers (name, version, per-thread flag).
// Generated from cudaTypedefs.h (tools/gen_cuda_driver.py -> proc_table.inc).
#pragma once

namespace rgpu::cuda_fe {

constexpr int kDriverApiVersion = 13000;  // the interface this library implements

enum class ProcStatus { Found = 0, SymbolNotFound = 1, VersionNotSufficient = 2 };

// The newest variant of `name` whose version is at most `version`; with `per_thread`, the
// per-thread-default-stream variant where the name has one.  nullptr with the status otherwise.
void* find_proc(const char* name, int version, bool per_thread, ProcStatus* status);

}  // namespace rgpu::cuda_fe
