// The cuda backend's answers to NVML-style questions: the server's own NVML (libnvidia-ml.so.1,
// NVIDIA's, never rgpu's), with its devices matched to the CUDA devices rgpud serves by UUID (else
// PCI bus id), so `rgpud --gpus` (CUDA_VISIBLE_DEVICES) is respected.  Identity comes from what
// rgpud's probe learnt from CUDA at start; without NVML that is all, and the rest is not supported.
// Nothing here creates a CUDA context.
#include <dlfcn.h>

#include <cstdio>
#include <cstring>
#include <mutex>
#include <string>

#include "backend/gpu_query.h"
#include "common/log.h"
#include "frontend/nvml/nvml_abi.h"

namespace rgpu::backend {
namespace {

// NVML's usual places, for when the search finds rgpu's own library first.
const char* const kNvmlPaths[] = {
    "/usr/lib/x86_64-linux-gnu/libnvidia-ml.so.1",
    "/usr/lib/aarch64-linux-gnu/libnvidia-ml.so.1",
    "/usr/lib64/libnvidia-ml.so.1",
    "/usr/lib/libnvidia-ml.so.1",
    "/usr/local/nvidia/lib64/libnvidia-ml.so.1",
    "/usr/lib/wsl/lib/libnvidia-ml.so.1",
};

#define RGPU_NVML_FUNCS(X)                                                                         \
  X(nvmlInit_v2, nvmlReturn_t (*)(void))                                                           \
  X(nvmlErrorString, const char* (*)(nvmlReturn_t))                                                \
  X(nvmlSystemGetDriverVersion, nvmlReturn_t (*)(char*, unsigned))                                 \
  X(nvmlSystemGetNVMLVersion, nvmlReturn_t (*)(char*, unsigned))                                   \
  X(nvmlDeviceGetHandleByUUID, nvmlReturn_t (*)(const char*, nvmlDevice_t*))                       \
  X(nvmlDeviceGetHandleByPciBusId_v2, nvmlReturn_t (*)(const char*, nvmlDevice_t*))                \
  X(nvmlDeviceGetMemoryInfo, nvmlReturn_t (*)(nvmlDevice_t, nvmlMemory_t*))                        \
  X(nvmlDeviceGetMemoryInfo_v2, nvmlReturn_t (*)(nvmlDevice_t, nvmlMemory_v2_t*))                  \
  X(nvmlDeviceGetUtilizationRates, nvmlReturn_t (*)(nvmlDevice_t, nvmlUtilization_t*))             \
  X(nvmlDeviceGetTemperature, nvmlReturn_t (*)(nvmlDevice_t, nvmlTemperatureSensors_t, unsigned*)) \
  X(nvmlDeviceGetPowerUsage, nvmlReturn_t (*)(nvmlDevice_t, unsigned*))                            \
  X(nvmlDeviceGetEnforcedPowerLimit, nvmlReturn_t (*)(nvmlDevice_t, unsigned*))                    \
  X(nvmlDeviceGetPowerManagementLimit, nvmlReturn_t (*)(nvmlDevice_t, unsigned*))                  \
  X(nvmlDeviceGetClockInfo, nvmlReturn_t (*)(nvmlDevice_t, nvmlClockType_t, unsigned*))            \
  X(nvmlDeviceGetMaxClockInfo, nvmlReturn_t (*)(nvmlDevice_t, nvmlClockType_t, unsigned*))         \
  X(nvmlDeviceGetComputeMode, nvmlReturn_t (*)(nvmlDevice_t, nvmlComputeMode_t*))                  \
  X(nvmlDeviceGetComputeRunningProcesses_v3,                                                       \
    nvmlReturn_t (*)(nvmlDevice_t, unsigned*, nvmlProcessInfo_t*))                                 \
  X(nvmlDeviceGetBrand, nvmlReturn_t (*)(nvmlDevice_t, nvmlBrandType_t*))                          \
  X(nvmlDeviceGetSerial, nvmlReturn_t (*)(nvmlDevice_t, char*, unsigned))                          \
  X(nvmlDeviceGetMinorNumber, nvmlReturn_t (*)(nvmlDevice_t, unsigned*))

struct Nvml {
#define RGPU_DECLARE(name, type) \
  using name##_fn = type;        \
  name##_fn name = nullptr;
  RGPU_NVML_FUNCS(RGPU_DECLARE)
#undef RGPU_DECLARE
};

// NVIDIA's NVML: the search's, else the first of kNvmlPaths; never rgpu's.  Null with `why`.
void* open_nvml(std::string& why) {
  bool saw_rgpu = false;
  auto attempt = [&](const char* name) -> void* {
    void* lib = dlopen(name, RTLD_NOW | RTLD_LOCAL);
    if (!lib) return nullptr;
    if (!is_rgpu_nvml(lib)) return lib;
    saw_rgpu = true;
    dlclose(lib);
    return nullptr;
  };
  if (void* lib = attempt("libnvidia-ml.so.1")) return lib;
  for (const char* p : kNvmlPaths)
    if (void* lib = attempt(p)) return lib;
  why = saw_rgpu ? "the libnvidia-ml.so.1 found is rgpu's own client library and NVIDIA's was "
                   "found nowhere else (take rgpu's lib directory off LD_LIBRARY_PATH)"
                 : "no libnvidia-ml.so.1 on this server";
  return nullptr;
}

std::string uuid_text(const std::array<uint8_t, 16>& u) {
  char s[64];
  snprintf(s, sizeof s, "GPU-%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x",
           u[0], u[1], u[2], u[3], u[4], u[5], u[6], u[7], u[8], u[9], u[10], u[11], u[12], u[13],
           u[14], u[15]);
  return s;
}

class CudaGpuQuery final : public GpuQuery {
 public:
  CudaGpuQuery(const proto::NvmlProbeTable& probe, int cuda_driver)
      : probe_(probe), cuda_driver_(cuda_driver), handles_(probe.gpus.size(), nullptr) {}

  int device_count() const override { return static_cast<int>(probe_.gpus.size()); }

  void system(proto::NvmlSystemRep& out) override {
    load();
    out.gpu_count = static_cast<uint32_t>(probe_.gpus.size());
    out.cuda_driver_version = cuda_driver_;
    char buf[NVML_SYSTEM_DRIVER_VERSION_BUFFER_SIZE] = {};
    if (nvml_.nvmlSystemGetDriverVersion &&
        nvml_.nvmlSystemGetDriverVersion(buf, sizeof buf) == NVML_SUCCESS)
      out.driver_version = buf;
    char v[NVML_SYSTEM_NVML_VERSION_BUFFER_SIZE] = {};
    if (nvml_.nvmlSystemGetNVMLVersion &&
        nvml_.nvmlSystemGetNVMLVersion(v, sizeof v) == NVML_SUCCESS)
      out.nvml_version = v;
  }

  Status device(int gpu, uint32_t want, proto::NvmlDeviceRep& out) override {
    if (gpu < 0 || gpu >= device_count())
      return Status::fail(err::InvalidDevice, "GPU " + std::to_string(gpu) +
                                                  " does not exist (the server has " +
                                                  std::to_string(device_count()) + ")");
    load();
    out = probe_.gpus[static_cast<size_t>(gpu)];  // identity and peers, from CUDA
    out.have &= proto::kNvmlIdentity | (want & proto::kNvmlPeers);
    if (!(want & proto::kNvmlPeers)) out.peers.clear();
    nvmlDevice_t h = handles_[static_cast<size_t>(gpu)];
    if (!h) return Status::success();
    auto ok = [](nvmlReturn_t r) { return r == NVML_SUCCESS; };
    unsigned u = 0, v = 0;
    if ((want & proto::kNvmlSerial) && nvml_.nvmlDeviceGetSerial) {
      char s[NVML_DEVICE_SERIAL_BUFFER_SIZE] = {};
      if (ok(nvml_.nvmlDeviceGetSerial(h, s, sizeof s)))
        out.serial = s, out.have |= proto::kNvmlSerial;
    }
    if ((want & proto::kNvmlMinor) && nvml_.nvmlDeviceGetMinorNumber &&
        ok(nvml_.nvmlDeviceGetMinorNumber(h, &u)))
      out.minor_number = u, out.have |= proto::kNvmlMinor;
    nvmlBrandType_t brand = 0;
    if ((want & proto::kNvmlBrand) && nvml_.nvmlDeviceGetBrand &&
        ok(nvml_.nvmlDeviceGetBrand(h, &brand)))
      out.brand = static_cast<uint32_t>(brand), out.have |= proto::kNvmlBrand;
    if (want & (proto::kNvmlMemory | proto::kNvmlReserved)) memory(h, out);
    nvmlUtilization_t util{};
    if ((want & proto::kNvmlUtil) && nvml_.nvmlDeviceGetUtilizationRates &&
        ok(nvml_.nvmlDeviceGetUtilizationRates(h, &util)))
      out.util_gpu = util.gpu, out.util_memory = util.memory, out.have |= proto::kNvmlUtil;
    if ((want & proto::kNvmlTemp) && nvml_.nvmlDeviceGetTemperature &&
        ok(nvml_.nvmlDeviceGetTemperature(h, NVML_TEMPERATURE_GPU, &u)))
      out.temperature = u, out.have |= proto::kNvmlTemp;
    if ((want & proto::kNvmlPower) && nvml_.nvmlDeviceGetPowerUsage &&
        ok(nvml_.nvmlDeviceGetPowerUsage(h, &u)))
      out.power_mw = u, out.have |= proto::kNvmlPower;
    if ((want & proto::kNvmlPowerLimit) && nvml_.nvmlDeviceGetEnforcedPowerLimit &&
        ok(nvml_.nvmlDeviceGetEnforcedPowerLimit(h, &u)))
      out.power_limit_mw = u, out.have |= proto::kNvmlPowerLimit;
    if ((want & proto::kNvmlPowerMgmt) && nvml_.nvmlDeviceGetPowerManagementLimit &&
        ok(nvml_.nvmlDeviceGetPowerManagementLimit(h, &u)))
      out.power_mgmt_limit_mw = u, out.have |= proto::kNvmlPowerMgmt;
    if ((want & proto::kNvmlClocks) && nvml_.nvmlDeviceGetClockInfo) {
      out.clocks.assign(proto::kNvmlClockKinds, proto::kNvmlNoClock);
      out.max_clocks.assign(proto::kNvmlClockKinds, proto::kNvmlNoClock);
      for (size_t k = 0; k < proto::kNvmlClockKinds; ++k) {
        auto type = static_cast<nvmlClockType_t>(k);
        if (ok(nvml_.nvmlDeviceGetClockInfo(h, type, &v))) out.clocks[k] = v;
        if (nvml_.nvmlDeviceGetMaxClockInfo && ok(nvml_.nvmlDeviceGetMaxClockInfo(h, type, &v)))
          out.max_clocks[k] = v;
      }
      out.have |= proto::kNvmlClocks;
    }
    nvmlComputeMode_t mode{};
    if ((want & proto::kNvmlComputeMode) && nvml_.nvmlDeviceGetComputeMode &&
        ok(nvml_.nvmlDeviceGetComputeMode(h, &mode)))
      out.compute_mode = static_cast<uint32_t>(mode), out.have |= proto::kNvmlComputeMode;
    if (want & proto::kNvmlProcesses) processes(h, out);
    return Status::success();
  }

 private:
  // Loads NVML once (at the first question, so a query link that never asks costs nothing).
  void load() {
    std::call_once(once_, [&] {
      std::string why;
      void* lib = open_nvml(why);
      if (lib) {
#define RGPU_LOAD(name, type) nvml_.name = reinterpret_cast<Nvml::name##_fn>(dlsym(lib, #name));
        RGPU_NVML_FUNCS(RGPU_LOAD)
#undef RGPU_LOAD
        nvmlReturn_t r = nvml_.nvmlInit_v2 ? nvml_.nvmlInit_v2() : NVML_ERROR_FUNCTION_NOT_FOUND;
        if (r != NVML_SUCCESS) {
          why = std::string("nvmlInit_v2 failed: ") +
                (nvml_.nvmlErrorString ? nvml_.nvmlErrorString(r) : std::to_string(r).c_str());
          nvml_ = Nvml{};
          lib = nullptr;
        }
      }
      if (!lib) {
        LOG_WARN(
            "NVML queries answer only what CUDA told at start (name, UUID, PCI, memory "
            "total): %s",
            why.c_str());
        return;
      }
      for (size_t i = 0; i < probe_.gpus.size(); ++i) {
        const auto& g = probe_.gpus[i];
        nvmlDevice_t h = nullptr;
        if (!nvml_.nvmlDeviceGetHandleByUUID ||
            nvml_.nvmlDeviceGetHandleByUUID(uuid_text(g.uuid).c_str(), &h) != NVML_SUCCESS) {
          char bus[32];
          snprintf(bus, sizeof bus, "%08x:%02x:%02x.0", g.pci_domain, g.pci_bus, g.pci_device);
          if (!nvml_.nvmlDeviceGetHandleByPciBusId_v2 ||
              nvml_.nvmlDeviceGetHandleByPciBusId_v2(bus, &h) != NVML_SUCCESS)
            h = nullptr;
        }
        if (!h)
          LOG_WARN(
              "CUDA device %zu (%s) is not among NVML's devices: only its CUDA identity is "
              "answered",
              i, uuid_text(g.uuid).c_str());
        handles_[i] = h;
      }
    });
  }

  void memory(nvmlDevice_t h, proto::NvmlDeviceRep& out) {
    nvmlMemory_v2_t m2{};
    m2.version = nvmlMemory_v2;
    if (nvml_.nvmlDeviceGetMemoryInfo_v2 &&
        nvml_.nvmlDeviceGetMemoryInfo_v2(h, &m2) == NVML_SUCCESS) {
      out.total_memory = m2.total;  // NVML's word for it, as a local nvidia-smi shows
      out.memory_free = m2.free;
      out.memory_used = m2.used;
      out.memory_reserved = m2.reserved;
      out.have |= proto::kNvmlMemory | proto::kNvmlReserved;
      return;
    }
    nvmlMemory_t m{};
    if (nvml_.nvmlDeviceGetMemoryInfo && nvml_.nvmlDeviceGetMemoryInfo(h, &m) == NVML_SUCCESS) {
      out.total_memory = m.total;
      out.memory_free = m.free;
      out.memory_used = m.used;
      out.have |= proto::kNvmlMemory;
    }
  }

  void processes(nvmlDevice_t h, proto::NvmlDeviceRep& out) {
    if (!nvml_.nvmlDeviceGetComputeRunningProcesses_v3) return;
    std::vector<nvmlProcessInfo_t> infos(16);
    for (int tries = 0; tries < 4; ++tries) {
      unsigned n = static_cast<unsigned>(infos.size());
      nvmlReturn_t r = nvml_.nvmlDeviceGetComputeRunningProcesses_v3(h, &n, infos.data());
      if (r == NVML_ERROR_INSUFFICIENT_SIZE) {
        infos.resize(n + 8);
        continue;
      }
      if (r != NVML_SUCCESS) return;
      for (unsigned i = 0; i < n && i < infos.size(); ++i)
        out.processes.push_back({infos[i].pid, infos[i].usedGpuMemory});
      out.have |= proto::kNvmlProcesses;
      return;
    }
  }

  const proto::NvmlProbeTable probe_;
  const int cuda_driver_;
  std::once_flag once_;
  Nvml nvml_;
  std::vector<nvmlDevice_t> handles_;
};

}  // namespace

bool is_rgpu_nvml(void* lib) {
  auto es = reinterpret_cast<const char* (*)(nvmlReturn_t)>(dlsym(lib, "nvmlErrorString"));
  if (!es) return false;
  const char* s = es(static_cast<nvmlReturn_t>(kRgpuNvmlMarkerCode));
  return s && strcmp(s, kRgpuNvmlMarker) == 0;
}

std::unique_ptr<GpuQuery> make_cuda_gpu_query(const proto::NvmlProbeTable& probe, int cuda_driver) {
  return std::make_unique<CudaGpuQuery>(probe, cuda_driver);
}

}  // namespace rgpu::backend
