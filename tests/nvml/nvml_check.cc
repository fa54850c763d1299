// Drives rgpu's libnvidia-ml.so.1 the way a program does (dlopen "libnvidia-ml.so.1" from the
// library path) and checks its answers against rgpu's libcuda.so.1 for the same index.
//   nvml_check list       every check below; prints one line per device and "ALL OK", or
//                         "FAIL: ..." lines and exits 1
//   nvml_check lost       nvmlInit, one good answer, "READY", then asks again every 100 ms until
//                         an answer fails: prints "LOST <nvmlReturn_t> <name>" (the test kills or
//                         stops the server meanwhile)
#include <dlfcn.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "frontend/nvml/nvml_abi.h"

namespace {

int failures = 0;
void *nvml = nullptr, *cuda = nullptr;

void fail(const std::string& what) {
  printf("FAIL: %s\n", what.c_str());
  ++failures;
}

template <class F>
F sym(void* lib, const char* name) {
  void* p = dlsym(lib, name);
  if (!p) {
    printf("FAIL: %s is not exported\n", name);
    fflush(stdout);
    _exit(2);
  }
  return reinterpret_cast<F>(p);
}

#define NVML(name, ...) sym<nvmlReturn_t (*)(__VA_ARGS__)>(nvml, #name)
#define CU(name, ...) sym<int (*)(__VA_ARGS__)>(cuda, #name)

const char* ename(nvmlReturn_t r) {
  return sym<const char* (*)(nvmlReturn_t)>(nvml, "nvmlErrorString")(r);
}

void expect(nvmlReturn_t got, nvmlReturn_t want, const std::string& what) {
  if (got != want)
    fail(what + ": " + std::to_string(got) + " (" + ename(got) + "), expected " +
         std::to_string(want) + " (" + ename(want) + ")");
}

std::string uuid_text(const unsigned char* u) {
  char s[48];
  snprintf(s, sizeof s, "GPU-%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x",
           u[0], u[1], u[2], u[3], u[4], u[5], u[6], u[7], u[8], u[9], u[10], u[11], u[12], u[13],
           u[14], u[15]);
  return s;
}

int list() {
  cuda = dlopen("libcuda.so.1", RTLD_NOW);
  if (!cuda) return printf("FAIL: cannot load libcuda.so.1: %s\n", dlerror()), 2;
  if (CU(cuInit, unsigned)(0) != 0) fail("cuInit");
  int cu_count = 0;
  CU(cuDeviceGetCount, int*)(&cu_count);

  // Before nvmlInit NVIDIA's library says so first, whatever the arguments (seen on an H200).
  expect(NVML(nvmlDeviceGetCount_v2, unsigned*)(nullptr), NVML_ERROR_UNINITIALIZED,
         "count into null before init");
  unsigned n = 0;
  expect(NVML(nvmlDeviceGetCount_v2, unsigned*)(&n), NVML_ERROR_UNINITIALIZED, "count before init");
  expect(NVML(nvmlInit_v2)(), NVML_SUCCESS, "nvmlInit_v2");
  expect(NVML(nvmlDeviceGetCount_v2, unsigned*)(nullptr), NVML_ERROR_INVALID_ARGUMENT,
         "count into null");
  expect(NVML(nvmlDeviceGetCount_v2, unsigned*)(&n), NVML_SUCCESS, "count");
  printf("count %u\n", n);
  if (static_cast<int>(n) != cu_count)
    fail("NVML counts " + std::to_string(n) + " devices, CUDA " + std::to_string(cu_count));
  for (unsigned i = 0; i < n; ++i) {
    nvmlDevice_t h = nullptr, by_uuid = nullptr, by_pci = nullptr, by_legacy = nullptr;
    expect(NVML(nvmlDeviceGetHandleByIndex_v2, unsigned, nvmlDevice_t*)(i, &h), NVML_SUCCESS,
           "handle by index");
    char name[NVML_DEVICE_NAME_V2_BUFFER_SIZE] = {}, uuid[NVML_DEVICE_UUID_V2_BUFFER_SIZE] = {};
    expect(NVML(nvmlDeviceGetName, nvmlDevice_t, char*, unsigned)(h, name, sizeof name),
           NVML_SUCCESS, "name");
    expect(NVML(nvmlDeviceGetName, nvmlDevice_t, char*, unsigned)(h, name, 4),
           NVML_ERROR_INSUFFICIENT_SIZE, "name into 4 bytes");
    expect(NVML(nvmlDeviceGetUUID, nvmlDevice_t, char*, unsigned)(h, uuid, sizeof uuid),
           NVML_SUCCESS, "uuid");
    nvmlPciInfo_t pci{};
    expect(NVML(nvmlDeviceGetPciInfo_v3, nvmlDevice_t, nvmlPciInfo_t*)(h, &pci), NVML_SUCCESS,
           "pci info");
    expect(NVML(nvmlDeviceGetHandleByUUID, const char*, nvmlDevice_t*)(uuid, &by_uuid),
           NVML_SUCCESS, "handle by UUID");
    expect(NVML(nvmlDeviceGetHandleByPciBusId_v2, const char*, nvmlDevice_t*)(pci.busId, &by_pci),
           NVML_SUCCESS, "handle by PCI bus id");
    expect(NVML(nvmlDeviceGetHandleByPciBusId_v2, const char*, nvmlDevice_t*)(pci.busIdLegacy,
                                                                              &by_legacy),
           NVML_SUCCESS, "handle by legacy PCI bus id");
    if (by_uuid != h || by_pci != h || by_legacy != h)
      fail("device " + std::to_string(i) + ": handles by index, UUID and PCI bus id differ");
    unsigned index = 99;
    expect(NVML(nvmlDeviceGetIndex, nvmlDevice_t, unsigned*)(h, &index), NVML_SUCCESS, "index");
    if (index != i) fail("nvmlDeviceGetIndex says " + std::to_string(index));
    nvmlMemory_t mem{};
    expect(NVML(nvmlDeviceGetMemoryInfo, nvmlDevice_t, nvmlMemory_t*)(h, &mem), NVML_SUCCESS,
           "memory");
    nvmlMemory_v2_t mem2{};
    mem2.version = nvmlMemory_v2;
    expect(NVML(nvmlDeviceGetMemoryInfo_v2, nvmlDevice_t, nvmlMemory_v2_t*)(h, &mem2), NVML_SUCCESS,
           "memory v2");
    if (mem.total != mem2.total || mem.free + mem.used != mem.total)
      fail("memory: total " + std::to_string(mem.total) + " free " + std::to_string(mem.free) +
           " used " + std::to_string(mem.used));
    nvmlUtilization_t util{99, 99};
    expect(NVML(nvmlDeviceGetUtilizationRates, nvmlDevice_t, nvmlUtilization_t*)(h, &util),
           NVML_SUCCESS, "utilization");
    int major = 0, minor = 0;
    expect(NVML(nvmlDeviceGetCudaComputeCapability, nvmlDevice_t, int*, int*)(h, &major, &minor),
           NVML_SUCCESS, "compute capability");
    unsigned temp = 0;
    nvmlReturn_t tr = NVML(nvmlDeviceGetTemperature, nvmlDevice_t, nvmlTemperatureSensors_t,
                           unsigned*)(h, NVML_TEMPERATURE_GPU, &temp);
    nvmlGpuP2PStatus_t p2p = NVML_P2P_STATUS_UNKNOWN;
    expect(NVML(nvmlDeviceGetP2PStatus, nvmlDevice_t, nvmlDevice_t, nvmlGpuP2PCapsIndex_t,
                nvmlGpuP2PStatus_t*)(h, h, NVML_P2P_CAPS_INDEX_READ, &p2p),
           NVML_SUCCESS, "P2P status with itself");

    // The same device through rgpu's driver.
    int dev = 0;
    CU(cuDeviceGet, int*, int)(&dev, static_cast<int>(i));
    char cu_name[256] = {};
    unsigned char cu_uuid[16] = {};
    size_t cu_total = 0;
    CU(cuDeviceGetName, char*, int, int)(cu_name, sizeof cu_name, dev);
    CU(cuDeviceGetUuid_v2, unsigned char*, int)(cu_uuid, dev);
    CU(cuDeviceTotalMem_v2, size_t*, int)(&cu_total, dev);
    if (std::string(name) != cu_name) fail(std::string("name ") + name + " vs CUDA's " + cu_name);
    if (uuid != uuid_text(cu_uuid))
      fail(std::string("UUID ") + uuid + " vs CUDA's " + uuid_text(cu_uuid));
    // On a GPU, NVML's total (what nvidia-smi shows) exceeds cuDeviceTotalMem's, natively too:
    // NVML_CHECK_NO_TOTAL=1 (scripts/gpu-e2e.sh) only prints both.
    if (mem.total != cu_total && !getenv("NVML_CHECK_NO_TOTAL"))
      fail("memory total " + std::to_string(mem.total) + " vs CUDA's " + std::to_string(cu_total));
    // The server's processes on this GPU: here this program's own session (rgpu's driver above).
    auto procs =
        NVML(nvmlDeviceGetComputeRunningProcesses_v3, nvmlDevice_t, unsigned*, nvmlProcessInfo_t*);
    unsigned count = 0;
    nvmlReturn_t pr = procs(h, &count, nullptr);
    if (pr != NVML_SUCCESS && pr != NVML_ERROR_INSUFFICIENT_SIZE)
      expect(pr, NVML_SUCCESS, "processes");
    std::vector<nvmlProcessInfo_t> infos(count + 1);
    unsigned room = static_cast<unsigned>(infos.size());
    expect(procs(h, &room, infos.data()), NVML_SUCCESS, "processes into room for them");
    if (room != count)
      fail("processes: counted " + std::to_string(count) + ", then " + std::to_string(room));
    printf("device %u  %s  %s  %s  total %llu used %llu  util %u/%u  cc %d.%d  procs %u  temp %s\n",
           i, name, uuid, pci.busId, mem.total, mem.used, util.gpu, util.memory, major, minor,
           count, ename(tr));
  }
  if (n >= 2) {
    nvmlDevice_t a = nullptr, b = nullptr;
    NVML(nvmlDeviceGetHandleByIndex_v2, unsigned, nvmlDevice_t*)(0, &a);
    NVML(nvmlDeviceGetHandleByIndex_v2, unsigned, nvmlDevice_t*)(n - 1, &b);
    nvmlGpuP2PStatus_t s = NVML_P2P_STATUS_UNKNOWN;
    expect(NVML(nvmlDeviceGetP2PStatus, nvmlDevice_t, nvmlDevice_t, nvmlGpuP2PCapsIndex_t,
                nvmlGpuP2PStatus_t*)(a, b, NVML_P2P_CAPS_INDEX_READ, &s),
           NVML_SUCCESS, "P2P status");
    printf("p2p 0-%u %d\n", n - 1, static_cast<int>(s));
  }
  nvmlDevice_t none = nullptr;
  expect(NVML(nvmlDeviceGetHandleByUUID, const char*, nvmlDevice_t*)(
             "GPU-00000000-1111-2222-3333-444444444444", &none),
         NVML_ERROR_NOT_FOUND, "unknown UUID");
  expect(NVML(nvmlDeviceGetHandleByPciBusId_v2, const char*, nvmlDevice_t*)("zz:1", &none),
         NVML_ERROR_INVALID_ARGUMENT, "malformed PCI bus id");
  expect(NVML(nvmlDeviceGetHandleByIndex_v2, unsigned, nvmlDevice_t*)(n, &none),
         NVML_ERROR_INVALID_ARGUMENT, "index past the last device");
  unsigned dummy = 0;
  expect(NVML(nvmlDeviceGetMinorNumber, nvmlDevice_t, unsigned*)(
             reinterpret_cast<nvmlDevice_t>(&dummy), &dummy),
         NVML_ERROR_INVALID_ARGUMENT, "a handle that is not one");
  nvmlDevice_t h0 = nullptr;
  if (n > 0) NVML(nvmlDeviceGetHandleByIndex_v2, unsigned, nvmlDevice_t*)(0, &h0);
  expect(NVML(nvmlDeviceGetFanSpeed, nvmlDevice_t, unsigned*)(h0, &dummy), NVML_ERROR_NOT_SUPPORTED,
         "an unimplemented function (nvmlDeviceGetFanSpeed)");
  char version[NVML_SYSTEM_DRIVER_VERSION_BUFFER_SIZE] = {};
  int cuda_version = 0;
  expect(NVML(nvmlSystemGetCudaDriverVersion_v2, int*)(&cuda_version), NVML_SUCCESS,
         "CUDA driver version");
  nvmlReturn_t dv = NVML(nvmlSystemGetDriverVersion, char*, unsigned)(version, sizeof version);
  printf("cuda driver %d  driver version %s\n", cuda_version,
         dv == NVML_SUCCESS ? version : ename(dv));

  // Reference counted: two inits need two shutdowns; then init again works.
  expect(NVML(nvmlInit_v2)(), NVML_SUCCESS, "second nvmlInit_v2");
  expect(NVML(nvmlShutdown)(), NVML_SUCCESS, "first nvmlShutdown");
  expect(NVML(nvmlDeviceGetCount_v2, unsigned*)(&dummy), NVML_SUCCESS, "count after one shutdown");
  expect(NVML(nvmlShutdown)(), NVML_SUCCESS, "second nvmlShutdown");
  expect(NVML(nvmlDeviceGetCount_v2, unsigned*)(&dummy), NVML_ERROR_UNINITIALIZED,
         "count after the last shutdown");
  expect(NVML(nvmlShutdown)(), NVML_ERROR_UNINITIALIZED, "shutdown once too often");
  expect(NVML(nvmlInitWithFlags, unsigned)(0), NVML_SUCCESS, "nvmlInitWithFlags after shutdown");
  if (n > 0) {
    // An old handle names no device after the last shutdown (seen on an H200); a new one does.
    char again[NVML_DEVICE_UUID_V2_BUFFER_SIZE] = {};
    expect(NVML(nvmlDeviceGetUUID, nvmlDevice_t, char*, unsigned)(h0, again, sizeof again),
           NVML_ERROR_INVALID_ARGUMENT, "a handle kept across shutdown and init");
    nvmlDevice_t fresh = nullptr;
    expect(NVML(nvmlDeviceGetHandleByIndex_v2, unsigned, nvmlDevice_t*)(0, &fresh), NVML_SUCCESS,
           "a new handle after init");
    expect(NVML(nvmlDeviceGetUUID, nvmlDevice_t, char*, unsigned)(fresh, again, sizeof again),
           NVML_SUCCESS, "the new handle's UUID");
  }
  expect(NVML(nvmlShutdown)(), NVML_SUCCESS, "last nvmlShutdown");
  if (failures == 0) printf("ALL OK\n");
  return failures ? 1 : 0;
}

int lost() {
  expect(NVML(nvmlInit_v2)(), NVML_SUCCESS, "nvmlInit_v2");
  nvmlDevice_t h = nullptr;
  expect(NVML(nvmlDeviceGetHandleByIndex_v2, unsigned, nvmlDevice_t*)(0, &h), NVML_SUCCESS,
         "handle");
  nvmlMemory_t m{};
  if (NVML(nvmlDeviceGetMemoryInfo, nvmlDevice_t, nvmlMemory_t*)(h, &m) != NVML_SUCCESS) {
    fail("the first answer");
    return 1;
  }
  printf("READY\n");
  fflush(stdout);
  for (;;) {
    nvmlReturn_t r = NVML(nvmlDeviceGetMemoryInfo, nvmlDevice_t, nvmlMemory_t*)(h, &m);
    if (r != NVML_SUCCESS) {
      printf("LOST %d %s\n", static_cast<int>(r), ename(r));
      fflush(stdout);
      return 0;
    }
    usleep(100000);
  }
}

}  // namespace

int main(int argc, char** argv) {
  setvbuf(stdout, nullptr, _IOLBF, 0);
  nvml = dlopen("libnvidia-ml.so.1", RTLD_NOW);
  if (!nvml) return printf("FAIL: cannot load libnvidia-ml.so.1: %s\n", dlerror()), 2;
  std::string mode = argc > 1 ? argv[1] : "list";
  if (mode == "list") return list();
  if (mode == "lost") return lost();
  fprintf(stderr, "usage: nvml_check list|lost\n");
  return 2;
}
