// libcudart.so.13 runs on the client core of the libcuda.so.1 the process loads (client/
// core_table.h): locate_client() finds rgpu's libcuda.so.1 and takes its Client through the
// rgpu-private export table, so a process using both libraries has one set of devices, contexts,
// allocations, streams and events.  cudaGetDriverEntryPoint* answer that library's functions.
#include <dlfcn.h>
#include <unistd.h>

#include <cstring>
#include <string>

#include "client/client.h"
#include "client/core_table.h"
#include "common/log.h"
#include "frontend/cudart/api.h"

namespace rgpu::client {

namespace {

const CoreTable* g_table = nullptr;  // set once, by locate_client (under Client::get's guard)

using GetExportTable = int (*)(const void** table, const unsigned char* uuid);

// Where the object holding `addr` was loaded from.
std::string object_path(const void* addr) {
  Dl_info info{};
  if (dladdr(addr, &info) != 0 && info.dli_fname != nullptr) return info.dli_fname;
  return "(unknown path)";
}

// The libcuda.so.1 of this process: the one already loaded, else the one installed next to this
// library (rgpu installs both in one directory), else whatever the search finds.
void* open_driver(std::string* tried) {
  if (void* h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD)) return h;
  std::string self = object_path(reinterpret_cast<const void*>(&locate_client));
  if (size_t slash = self.rfind('/'); slash != std::string::npos) {
    std::string sibling = self.substr(0, slash) + "/libcuda.so.1";
    if (access(sibling.c_str(), R_OK) == 0) {
      if (void* h = dlopen(sibling.c_str(), RTLD_NOW | RTLD_GLOBAL)) return h;
      *tried += sibling + ": " + dlerror() + "; ";
    }
  }
  if (void* h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_GLOBAL)) return h;
  *tried += std::string("libcuda.so.1: ") + dlerror();
  return nullptr;
}

// The reason `h` cannot serve this library, or "" with *out set.
std::string take_table(void* h, const CoreTable** out) {
  auto get = reinterpret_cast<GetExportTable>(dlsym(h, "cuGetExportTable"));
  if (get == nullptr) {
    void* any = dlsym(h, "cuInit");
    return "the libcuda.so.1 loaded from " + object_path(any) + " has no cuGetExportTable";
  }
  const std::string path = object_path(reinterpret_cast<const void*>(get));
  const void* t = nullptr;
  if (get(&t, kCoreTableUuid) != 0 || t == nullptr)
    return "the libcuda.so.1 loaded from " + path +
           " is not rgpu's (it has no rgpu core table): put rgpu's lib directory first on "
           "LD_LIBRARY_PATH (rgpu run does)";
  const auto* table = static_cast<const CoreTable*>(t);
  if (table->size < sizeof(CoreTable) || table->version != kCoreTableVersion ||
      table->client_bytes != sizeof(Client))
    return "rgpu's libcuda.so.1 at " + path + " (core table version " +
           std::to_string(table->version) + ", Client of " + std::to_string(table->client_bytes) +
           " bytes) was built from other sources than this libcudart.so.13 (version " +
           std::to_string(kCoreTableVersion) + ", " + std::to_string(sizeof(Client)) +
           " bytes): install both from one build";
  *out = table;
  return "";
}

}  // namespace

Client* locate_client() {
  std::string tried;
  const CoreTable* table = nullptr;
  std::string why;
  if (void* h = open_driver(&tried))
    why = take_table(h, &table);
  else
    why = "cannot load libcuda.so.1 (" + tried + ")";
  if (table == nullptr) {
    // Without the process's core there is nothing to run on: no devices, rather than a second
    // core beside whatever driver the process has.
    Client* c = Client::make(false);
    LOG_ERROR("rgpu's libcudart.so.13 runs on rgpu's libcuda.so.1, but %s; no CUDA devices",
              why.c_str());
    return c;
  }
  g_table = table;
  Client* c = table->client();
  bind_library(c);
  // As NVIDIA's runtime does: the driver is initialised once the runtime is, so driver calls
  // work after runtime calls.
  table->init(0);
  return c;
}

}  // namespace rgpu::client

namespace {

using rgpu::cudart::ret;

// cudaEnableDefault / cudaEnableLegacyStream / cudaEnablePerThreadDefaultStream are the driver's
// CU_GET_PROC_ADDRESS_* flags; the default of the _ptsz entry points is the per-thread stream.
cudaError_t entry_point(const char* symbol, void** fn, int version, unsigned long long flags,
                        cudaDriverEntryPointQueryResult* status, bool per_thread) {
  if (symbol == nullptr || fn == nullptr || (flags & ~3ull) != 0 || flags == 3)
    return ret(rgpu::err::InvalidValue);
  rgpu::client::Client::get();  // locates the driver
  const rgpu::client::CoreTable* t = rgpu::client::g_table;
  if (t == nullptr) {
    *fn = nullptr;
    return ret(rgpu::err::InsufficientDriver);
  }
  if (flags == 0 && per_thread) flags = 2;
  int st = 0;
  int r = t->get_proc_address(symbol, fn, version, flags, &st);
  if (status) *status = static_cast<cudaDriverEntryPointQueryResult>(st);
  return ret(static_cast<rgpu::CudaError>(r));
}

}  // namespace

#define RGPU_EXPORT extern "C" __attribute__((visibility("default")))

RGPU_EXPORT cudaError_t cudaGetDriverEntryPoint(const char* symbol, void** funcPtr,
                                                unsigned long long flags,
                                                cudaDriverEntryPointQueryResult* driverStatus) {
  return entry_point(symbol, funcPtr, CUDART_VERSION, flags, driverStatus, false);
}

RGPU_EXPORT cudaError_t
cudaGetDriverEntryPoint_ptsz(const char* symbol, void** funcPtr, unsigned long long flags,
                             cudaDriverEntryPointQueryResult* driverStatus) {
  return entry_point(symbol, funcPtr, CUDART_VERSION, flags, driverStatus, true);
}

RGPU_EXPORT cudaError_t cudaGetDriverEntryPointByVersion(
    const char* symbol, void** funcPtr, unsigned int cudaVersion, unsigned long long flags,
    cudaDriverEntryPointQueryResult* driverStatus) {
  return entry_point(symbol, funcPtr, static_cast<int>(cudaVersion), flags, driverStatus, false);
}

RGPU_EXPORT cudaError_t cudaGetDriverEntryPointByVersion_ptsz(
    const char* symbol, void** funcPtr, unsigned int cudaVersion, unsigned long long flags,
    cudaDriverEntryPointQueryResult* driverStatus) {
  return entry_point(symbol, funcPtr, static_cast<int>(cudaVersion), flags, driverStatus, true);
}

// The driver's private tables (libcuda.so.1's cuGetExportTable, rgpu's own answering): a library
// linked against this runtime reaches them as it would through NVIDIA's.
RGPU_EXPORT cudaError_t cudaGetExportTable(const void** ppExportTable,
                                           const cudaUUID_t* pExportTableId) {
  if (ppExportTable == nullptr || pExportTableId == nullptr) return ret(rgpu::err::InvalidValue);
  void* fn = nullptr;
  if (cudaError_t e = entry_point("cuGetExportTable", &fn, CUDART_VERSION, 0, nullptr, false);
      e != cudaSuccess)
    return e;
  if (fn == nullptr) return ret(rgpu::err::InsufficientDriver);
  using Get = int (*)(const void**, const cudaUUID_t*);
  return ret(static_cast<rgpu::CudaError>(reinterpret_cast<Get>(fn)(ppExportTable, pExportTableId)));
}
