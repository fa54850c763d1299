#include "frontend/cuda/export_tables.h"

#include <cuda.h>
#include <pthread.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstring>
#include <map>
#include <mutex>
#include <set>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "client/client.h"
#include "client/core_table.h"
#include "common/log.h"
#include "frontend/cuda/integrity.h"

namespace rgpu::cuda_fe {

namespace {

using Uuid = unsigned char[16];

std::string uuid_text(const unsigned char id[16]) {
  std::string s;
  char b[3];
  for (int i = 0; i < 16; ++i) {
    std::snprintf(b, sizeof b, "%02x", id[i]);
    s += b;
    if (i % 4 == 3 && i != 15) s += ' ';
  }
  return s;
}

void log_once(const std::string& what) {
  static std::mutex mu;
  static std::set<std::string> logged;
  std::lock_guard<std::mutex> lock(mu);
  if (logged.insert(what).second) LOG_WARN("%s", what.c_str());
}

// A slot whose function rgpu does not provide (NVIDIA's runtime 13 was not seen calling it):
// logged once by table and slot, answered CUDA_ERROR_NOT_SUPPORTED.
template <int kTable, int kSlot>
CUresult unsupported_slot() {
  log_once("cuGetExportTable: slot " + std::to_string(kSlot) + " of export table #" +
           std::to_string(kTable) +
           " was called; rgpu does not provide it (CUDA_ERROR_NOT_SUPPORTED)");
  return CUDA_ERROR_NOT_SUPPORTED;
}

template <int kTable, size_t kSlots>
struct Table {
  const void* slot[kSlots];
};

template <int kTable, size_t kSlots, size_t... I>
constexpr Table<kTable, kSlots> unsupported_table(std::index_sequence<I...>) {
  return {{reinterpret_cast<const void*>(kSlots * sizeof(void*)),
           reinterpret_cast<const void*>(&unsupported_slot<kTable, static_cast<int>(I) + 1>)...}};
}

template <int kTable, size_t kSlots>
Table<kTable, kSlots> make_table() {
  return unsupported_table<kTable, kSlots>(std::make_index_sequence<kSlots - 1>());
}

// ---- CUDART_INTERFACE: slot 2 hands the runtime a device's primary context.
CUresult cudart_primary_context(CUcontext* out, CUdevice dev) {
  if (out == nullptr) return CUDA_ERROR_INVALID_VALUE;
  return cuDevicePrimaryCtxRetain(out, dev);
}

// ---- TOOLS_RUNTIME_CALLBACK_HOOKS: slots 2 and 6 hand back buffers the runtime may write.
// The first holds one 32-bit "a tool subscribed" word per runtime API (CUPTI's callback ids):
// the runtime 13 reads the word of the API it runs, without regard to the size we report (seen:
// cudaLogsDumpToFile, id 516, reads bytes 2064..2067), and calls slots 4 and 1 around the API
// when it is nonzero.  Zero for every id there is: no tool subscribed.  CUDA 13.0 has 523 ids
// (cupti_runtime_cbid.h); the buffer has room for 16 times as many.  (1024 bytes, as other
// reimplementations give, let ids from 256 on read whatever lies behind it.)
void tools_buffer_1(void** buf, size_t* size) {
  static uint32_t b[8192];
  if (buf != nullptr) *buf = b;
  if (size != nullptr) *size = sizeof b;
}
void tools_buffer_2(void** buf, size_t* size) {
  static unsigned char b[4096];  // 14 bytes are used (cuda-abi.md); the rest is margin
  if (buf != nullptr) *buf = b;
  if (size != nullptr) *size = sizeof b;
}

// ---- CONTEXT_LOCAL_STORAGE_INTERFACE_V0301 (no size slot): the runtime's per-context state.
using ClsDtor = void (*)(CUcontext, void*, void*);
struct ClsEntry {
  void* value;
  ClsDtor dtor;
};
std::mutex cls_mu;
std::map<std::pair<CUcontext, void*>, ClsEntry>& cls() {
  static auto* m = new std::map<std::pair<CUcontext, void*>, ClsEntry>;  // outlives exit handlers
  return *m;
}

CUcontext resolve(CUcontext ctx) {
  if (ctx == nullptr || ctx == reinterpret_cast<CUcontext>(-1)) {
    CUcontext cur = nullptr;
    if (cuCtxGetCurrent(&cur) != CUDA_SUCCESS) return nullptr;
    return cur;
  }
  return ctx;
}

CUresult cls_put(CUcontext ctx, void* key, void* value, ClsDtor dtor) {
  CUcontext c = resolve(ctx);
  if (c == nullptr) return CUDA_ERROR_INVALID_CONTEXT;
  std::lock_guard<std::mutex> lock(cls_mu);
  cls()[{c, key}] = ClsEntry{value, dtor};
  return CUDA_SUCCESS;
}

CUresult cls_delete(CUcontext ctx, void* key) {
  CUcontext c = resolve(ctx);
  std::lock_guard<std::mutex> lock(cls_mu);
  auto& m = cls();
  if (m.erase({c, key}) > 0) return CUDA_SUCCESS;
  // Some readings of this slot take (key, value*) instead: accept a key in the first argument.
  for (auto it = m.begin(); it != m.end(); ++it) {
    if (it->first.second == static_cast<void*>(ctx)) {
      m.erase(it);
      return CUDA_SUCCESS;
    }
  }
  return CUDA_ERROR_INVALID_HANDLE;
}

CUresult cls_get(void** value, CUcontext ctx, void* key) {
  if (value == nullptr) return CUDA_ERROR_INVALID_VALUE;
  CUcontext c = resolve(ctx);
  std::lock_guard<std::mutex> lock(cls_mu);
  auto it = cls().find({c, key});
  if (it == cls().end()) return CUDA_ERROR_INVALID_HANDLE;
  *value = it->second.value;
  return CUDA_SUCCESS;
}

// ---- CONTEXT_CHECKS: slot 2 reports nothing unusual about a context; slot 3 answers 0.
CUresult context_check(CUcontext, unsigned* r1, const void** r2) {
  if (r1 != nullptr) *r1 = 0;
  if (r2 != nullptr) *r2 = nullptr;
  return CUDA_SUCCESS;
}
unsigned context_check_flags() { return 0; }

// ---- CTX_CREATE_BYPASS: slot 1 creates a context as cuCtxCreate_v2 does.
CUresult ctx_create_bypass(CUcontext* pctx, unsigned flags, CUdevice dev) {
  return cuCtxCreate(pctx, nullptr, flags, dev);
}

// ---- TOOLS_TLS: slot 2 answers the calling thread's current context (cuBLASLt keys its
// per-context state on it, with TOOLS_CONTEXT's slot 4).
CUresult tools_current_context(CUcontext* out) {
  if (out == nullptr) return CUDA_ERROR_INVALID_VALUE;
  return cuCtxGetCurrent(out);
}

// ---- TOOLS_CONTEXT (cuFFT, cuBLAS): slot 4 answers a context's unique number, as cuCtxGetId.
CUresult tools_context_id(CUcontext ctx, unsigned long long* id) {
  if (id == nullptr) return CUDA_ERROR_INVALID_VALUE;
  return cuCtxGetId(ctx, id);
}

// ---- TOOLS_CONTEXT slots 51 and 39 (cuBLAS's per-stream workspace pool, used when no
// cublasSetWorkspace was given; a failure there is CUBLAS_STATUS_INTERNAL_ERROR): slot 51
// turns a public stream into a "tools handle" (ctx, stream, per-thread flag), slot 39 answers
// that handle's unique stream number, as cuStreamGetId.  A tools handle is an interned record
// that lives for the process (one per distinct (context, stream, per-thread) seen).
struct ToolsStream {
  CUcontext ctx;
  CUstream stream;
  bool per_thread;
};
std::mutex tools_stream_mu;
std::map<std::tuple<CUcontext, CUstream, bool>, ToolsStream*>& tools_streams() {
  static auto* m = new std::map<std::tuple<CUcontext, CUstream, bool>, ToolsStream*>;
  return *m;
}

CUresult tools_stream_handle(CUcontext ctx, CUstream stream, ToolsStream** out,
                             unsigned char per_thread) {
  if (out == nullptr) return CUDA_ERROR_INVALID_VALUE;
  CUcontext c = resolve(ctx);
  if (c == nullptr) return CUDA_ERROR_INVALID_CONTEXT;
  const bool pt = per_thread != 0 || stream == CU_STREAM_PER_THREAD;
  if (pt && stream == nullptr) stream = CU_STREAM_PER_THREAD;
  std::lock_guard<std::mutex> lock(tools_stream_mu);
  ToolsStream*& e = tools_streams()[{c, stream, pt}];
  if (e == nullptr) e = new ToolsStream{c, stream, pt};
  *out = e;
  return CUDA_SUCCESS;
}

CUresult tools_stream_id(CUcontext ctx, ToolsStream* ts, unsigned long long* id) {
  if (ts == nullptr || id == nullptr) return CUDA_ERROR_INVALID_VALUE;
  CUcontext want = ctx != nullptr ? ctx : ts->ctx;
  CUcontext cur = nullptr;
  cuCtxGetCurrent(&cur);
  const bool push = want != cur;
  if (push) {
    if (CUresult r = cuCtxPushCurrent(want); r != CUDA_SUCCESS) return r;
  }
  CUresult r = cuStreamGetId(ts->stream, id);  // CU_STREAM_PER_THREAD: the calling thread's
  if (push) {
    CUcontext popped = nullptr;
    cuCtxPopCurrent(&popped);
  }
  return r;
}

// ---- TOOLS_MODULE (cuFFT): slot 7 calls `fn(data, function)` for each function of a module and
// answers how many there were (cuFFT asks modules of one kernel and expects 1; an error is 0).
using EachFunction = void (*)(void* data, CUfunction f);
unsigned tools_module_functions(CUcontext, CUmodule mod, EachFunction fn, void* data) {
  unsigned count = 0;
  if (fn == nullptr || cuModuleGetFunctionCount(&count, mod) != CUDA_SUCCESS || count == 0)
    return 0;
  std::vector<CUfunction> fs(count);
  if (cuModuleEnumerateFunctions(fs.data(), count, mod) != CUDA_SUCCESS) return 0;
  for (CUfunction f : fs) fn(data, f);
  return count;
}

// ---- INTEGRITY_CHECK: slot 1.
CUresult integrity_check(unsigned version, uint64_t unix_seconds, uint64_t (*out)[2]);

auto cudart_interface = [] {
  auto t = make_table<2, 13>();
  t.slot[2] = reinterpret_cast<const void*>(&cudart_primary_context);
  return t;
}();
auto tools_hooks = [] {
  auto t = make_table<3, 7>();
  t.slot[2] = reinterpret_cast<const void*>(&tools_buffer_1);
  t.slot[6] = reinterpret_cast<const void*>(&tools_buffer_2);
  return t;
}();
auto tools_tls = [] {
  auto t = make_table<4, 4>();
  t.slot[2] = reinterpret_cast<const void*>(&tools_current_context);
  return t;
}();
const void* const context_local_storage[4] = {
    reinterpret_cast<const void*>(&cls_put), reinterpret_cast<const void*>(&cls_delete),
    reinterpret_cast<const void*>(&cls_get),
    reinterpret_cast<const void*>(&unsupported_slot<5, 3>)};
auto context_checks = [] {
  auto t = make_table<6, 4>();
  t.slot[2] = reinterpret_cast<const void*>(&context_check);
  t.slot[3] = reinterpret_cast<const void*>(&context_check_flags);
  return t;
}();
auto integrity = [] {
  auto t = make_table<7, 3>();
  t.slot[1] = reinterpret_cast<const void*>(&integrity_check);
  return t;
}();
auto tools_context = [] {
  auto t = make_table<9, 95>();
  t.slot[4] = reinterpret_cast<const void*>(&tools_context_id);
  t.slot[39] = reinterpret_cast<const void*>(&tools_stream_id);
  t.slot[51] = reinterpret_cast<const void*>(&tools_stream_handle);
  return t;
}();
auto tools_module = [] {
  auto t = make_table<10, 64>();
  t.slot[7] = reinterpret_cast<const void*>(&tools_module_functions);
  return t;
}();
// 1734dc26 (asked for by PyTorch's cuBLASLt 13, NVRTC, nvJitLink, CUPTI): cuBLASLt calls its slot
// 4 without checking that the table was found (a crash on a refusal, seen on an H200), and takes
// its fallback when the slot fails.  Served with the size NVIDIA's driver 580 gives it, every slot
// answering CUDA_ERROR_NOT_SUPPORTED (logged once).
auto lt_table = make_table<11, 17>();
auto ctx_bypass = [] {
  auto t = make_table<8, 2>();
  t.slot[1] = reinterpret_cast<const void*>(&ctx_create_bypass);
  return t;
}();

CUresult integrity_check(unsigned version, uint64_t unix_seconds, uint64_t (*out)[2]) {
  if (out == nullptr) return CUDA_ERROR_INVALID_VALUE;
  IntegrityInput in{};
  int driver = 0;
  if (CUresult r = cuDriverGetVersion(&driver); r != CUDA_SUCCESS) return r;
  in.driver_version = static_cast<uint32_t>(driver);
  in.check_version = version;
  in.pid = static_cast<uint32_t>(getpid());
  in.thread = static_cast<uint32_t>(reinterpret_cast<uintptr_t>(pthread_self()));
  in.cudart_table = &cudart_interface;
  in.integrity_table = &integrity;
  in.check_function = reinterpret_cast<const void*>(&integrity_check);
  in.unix_seconds = unix_seconds;
  if (version % 10 >= 2) {
    int count = 0;
    if (CUresult r = cuDeviceGetCount(&count); r != CUDA_SUCCESS) return r;
    for (int i = 0; i < count; ++i) {
      CUdevice dev = 0;
      CUuuid uuid{};
      IntegrityDevice d{};
      if (CUresult r = cuDeviceGet(&dev, i); r != CUDA_SUCCESS) return r;
      if (CUresult r = cuDeviceGetUuid(&uuid, dev); r != CUDA_SUCCESS) return r;
      std::memcpy(d.uuid, uuid.bytes, 16);
      cuDeviceGetAttribute(&d.pci_domain, CU_DEVICE_ATTRIBUTE_PCI_DOMAIN_ID, dev);
      cuDeviceGetAttribute(&d.pci_bus, CU_DEVICE_ATTRIBUTE_PCI_BUS_ID, dev);
      cuDeviceGetAttribute(&d.pci_device, CU_DEVICE_ATTRIBUTE_PCI_DEVICE_ID, dev);
      in.devices.push_back(d);
    }
  }
  const std::array<uint64_t, 2> answer = integrity_answer(in);
  (*out)[0] = answer[0];
  (*out)[1] = answer[1];
  return CUDA_SUCCESS;
}

// ---- rgpu's own table: libcudart.so.13 takes the process's one client core from here
// (client/core_table.h).
client::Client* core_client() { return &client::Client::get(); }
int core_init(unsigned flags) { return cuInit(flags); }
int core_proc_address(const char* symbol, void** pfn, int version, unsigned long long flags,
                      int* status) {
  CUdriverProcAddressQueryResult st = CU_GET_PROC_ADDRESS_SUCCESS;
  CUresult r = cuGetProcAddress_v2(symbol, pfn, version, flags, &st);
  if (status != nullptr) *status = static_cast<int>(st);
  return static_cast<int>(r);
}
const client::CoreTable core_table = {sizeof(client::CoreTable),
                                      client::kCoreTableVersion,
                                      sizeof(client::Client),
                                      &core_client,
                                      &core_init,
                                      &core_proc_address};

struct Known {
  unsigned char id[16];
  const void* table;
};

const Known kKnown[] = {
    {{0x6b, 0xd5, 0xfb, 0x6c, 0x5b, 0xf4, 0xe7, 0x4a, 0x89, 0x87, 0xd9, 0x39, 0x12, 0xfd, 0x9d,
      0xf9},
     &cudart_interface},
    {{0xa0, 0x94, 0x79, 0x8c, 0x2e, 0x74, 0x2e, 0x74, 0x93, 0xf2, 0x08, 0x00, 0x20, 0x0c, 0x0a,
      0x66},
     &tools_hooks},
    {{0x42, 0xd8, 0x5a, 0x81, 0x23, 0xf6, 0xcb, 0x47, 0x82, 0x98, 0xf6, 0xe7, 0x8a, 0x3a, 0xec,
      0xdc},
     &tools_tls},
    {{0xc6, 0x93, 0x33, 0x6e, 0x11, 0x21, 0xdf, 0x11, 0xa8, 0xc3, 0x68, 0xf3, 0x55, 0xd8, 0x95,
      0x93},
     context_local_storage},
    {{0x26, 0x3e, 0x88, 0x60, 0x7c, 0xd2, 0x61, 0x43, 0x92, 0xf6, 0xbb, 0xd5, 0x00, 0x6d, 0xfa,
      0x7e},
     &context_checks},
    {{0xd4, 0x08, 0x20, 0x55, 0xbd, 0xe6, 0x70, 0x4b, 0x8d, 0x34, 0xba, 0x12, 0x3c, 0x66, 0xe1,
      0xf2},
     &integrity},
    {{0x0c, 0xa5, 0x0b, 0x8c, 0x10, 0x04, 0x92, 0x9a, 0x89, 0xa7, 0xd0, 0xdf, 0x10, 0xe7, 0x72,
      0x86},
     &ctx_bypass},
    {{0x21, 0x31, 0x8c, 0x60, 0x97, 0x14, 0x32, 0x48, 0x8c, 0xa6, 0x41, 0xff, 0x73, 0x24, 0xc8,
      0xf2},
     &tools_context},
    {{0x6e, 0x16, 0x3f, 0xbe, 0xb9, 0x58, 0x44, 0x4d, 0x83, 0x5c, 0xe1, 0x82, 0xaf, 0xf1, 0x99,
      0x1e},
     &tools_module},
    {{0x17, 0x34, 0xdc, 0x26, 0x80, 0x0d, 0x47, 0x45, 0x87, 0x26, 0xc0, 0xf1, 0xe7, 0xdd, 0x8b,
      0xca},
     &lt_table},
};

}  // namespace

const void* find_export_table(const unsigned char id[16]) {
  if (std::memcmp(client::kCoreTableUuid, id, 16) == 0) return &core_table;
  for (const Known& k : kKnown)
    if (std::memcmp(k.id, id, 16) == 0) return k.table;
  // NVIDIA's runtime asks for this one before cuInit and works on without it: not worth a warning.
  static const unsigned char kQuietlyRefused[16] = {0xf8, 0xcf, 0xf9, 0x51, 0x21, 0x46, 0x8b, 0x4e,
                                                    0xb9, 0xe2, 0xfb, 0x46, 0x9e, 0x7c, 0x0d, 0xd9};
  if (std::memcmp(id, kQuietlyRefused, 16) == 0) {
    LOG_INFO("cuGetExportTable: table %s is not provided by rgpu (CUDA_ERROR_NOT_FOUND)",
             uuid_text(id).c_str());
    return nullptr;
  }
  log_once("cuGetExportTable: table " + uuid_text(id) +
           " is not provided by rgpu (CUDA_ERROR_NOT_FOUND)");
  return nullptr;
}

void context_ended(void* ctx) {
  std::vector<std::pair<void*, ClsEntry>> ended;
  {
    std::lock_guard<std::mutex> lock(cls_mu);
    auto& m = cls();
    for (auto it = m.begin(); it != m.end();) {
      if (it->first.first == static_cast<CUcontext>(ctx)) {
        ended.emplace_back(it->first.second, it->second);
        it = m.erase(it);
      } else {
        ++it;
      }
    }
  }
  for (auto& [key, e] : ended)  // outside the lock: a destructor may call back into the driver
    if (e.dtor != nullptr) e.dtor(static_cast<CUcontext>(ctx), key, e.value);
}

}  // namespace rgpu::cuda_fe
