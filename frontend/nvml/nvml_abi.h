// NVML's application binary interface, as NVIDIA documents it publicly (the NVML API reference):
// the return codes, the opaque device handle, and the structures and constants of the calls rgpu
// answers.  Written for rgpu from those documented facts: there is no nvml.h on the machines that
// build rgpu.  Used by rgpu's libnvidia-ml.so.1 (frontend/nvml/) and by rgpud's cuda backend,
// which reads the server's own NVML (backend/cuda/cuda_nvml.cc).  Plain C layouts: sizes and
// offsets must match NVIDIA's.
#pragma once

#include <cstdint>

extern "C" {

typedef enum {
  NVML_SUCCESS = 0,
  NVML_ERROR_UNINITIALIZED = 1,
  NVML_ERROR_INVALID_ARGUMENT = 2,
  NVML_ERROR_NOT_SUPPORTED = 3,
  NVML_ERROR_NO_PERMISSION = 4,
  NVML_ERROR_ALREADY_INITIALIZED = 5,
  NVML_ERROR_NOT_FOUND = 6,
  NVML_ERROR_INSUFFICIENT_SIZE = 7,
  NVML_ERROR_INSUFFICIENT_POWER = 8,
  NVML_ERROR_DRIVER_NOT_LOADED = 9,
  NVML_ERROR_TIMEOUT = 10,
  NVML_ERROR_IRQ_ISSUE = 11,
  NVML_ERROR_LIBRARY_NOT_FOUND = 12,
  NVML_ERROR_FUNCTION_NOT_FOUND = 13,
  NVML_ERROR_CORRUPTED_INFOROM = 14,
  NVML_ERROR_GPU_IS_LOST = 15,
  NVML_ERROR_RESET_REQUIRED = 16,
  NVML_ERROR_OPERATING_SYSTEM = 17,
  NVML_ERROR_LIB_RM_VERSION_MISMATCH = 18,
  NVML_ERROR_IN_USE = 19,
  NVML_ERROR_MEMORY = 20,
  NVML_ERROR_NO_DATA = 21,
  NVML_ERROR_VGPU_ECC_NOT_SUPPORTED = 22,
  NVML_ERROR_INSUFFICIENT_RESOURCES = 23,
  NVML_ERROR_FREQ_NOT_SUPPORTED = 24,
  NVML_ERROR_ARGUMENT_VERSION_MISMATCH = 25,
  NVML_ERROR_DEPRECATED = 26,
  NVML_ERROR_NOT_READY = 27,
  NVML_ERROR_GPU_NOT_FOUND = 28,
  NVML_ERROR_INVALID_STATE = 29,
  NVML_ERROR_UNKNOWN = 999
} nvmlReturn_t;

typedef struct nvmlDevice_st* nvmlDevice_t;

#define NVML_DEVICE_UUID_V2_BUFFER_SIZE 96
#define NVML_DEVICE_NAME_V2_BUFFER_SIZE 96
#define NVML_DEVICE_SERIAL_BUFFER_SIZE 30
#define NVML_SYSTEM_DRIVER_VERSION_BUFFER_SIZE 80
#define NVML_SYSTEM_NVML_VERSION_BUFFER_SIZE 80
#define NVML_DEVICE_PCI_BUS_ID_BUFFER_SIZE 32
#define NVML_DEVICE_PCI_BUS_ID_BUFFER_V2_SIZE 16
#define NVML_VALUE_NOT_AVAILABLE (~0ULL)
#define NVML_INIT_FLAG_NO_GPUS 1
#define NVML_INIT_FLAG_NO_ATTACH 2

// Versioned structures carry sizeof | (version << 24) in their first field.
#define NVML_STRUCT_VERSION(size, ver) ((unsigned int)(size) | ((unsigned int)(ver) << 24U))

typedef struct {
  unsigned long long total;
  unsigned long long free;
  unsigned long long used;
} nvmlMemory_t;

typedef struct {
  unsigned int version;
  unsigned long long total;
  unsigned long long reserved;
  unsigned long long free;
  unsigned long long used;
} nvmlMemory_v2_t;
#define nvmlMemory_v2 NVML_STRUCT_VERSION(sizeof(nvmlMemory_v2_t), 2)

// nvmlDeviceGetPciInfo_v2 and _v3.
typedef struct {
  char busIdLegacy[NVML_DEVICE_PCI_BUS_ID_BUFFER_V2_SIZE];  // "dddd:bb:dd.f"
  unsigned int domain;
  unsigned int bus;
  unsigned int device;
  unsigned int pciDeviceId;                        // (device id << 16) | vendor id
  unsigned int pciSubSystemId;                     // (subsystem id << 16) | subsystem vendor id
  char busId[NVML_DEVICE_PCI_BUS_ID_BUFFER_SIZE];  // "dddddddd:bb:dd.f"
} nvmlPciInfo_t;

// The unversioned nvmlDeviceGetPciInfo (the first NVML releases): a 16-byte bus id, four
// reserved words at the end.
typedef struct {
  char busId[NVML_DEVICE_PCI_BUS_ID_BUFFER_V2_SIZE];
  unsigned int domain;
  unsigned int bus;
  unsigned int device;
  unsigned int pciDeviceId;
  unsigned int pciSubSystemId;
  unsigned int reserved0;
  unsigned int reserved1;
  unsigned int reserved2;
  unsigned int reserved3;
} nvmlPciInfo_v1_t;

typedef struct {
  unsigned int gpu;     // percent of time a kernel ran
  unsigned int memory;  // percent of time device memory was read or written
} nvmlUtilization_t;

// nvmlDeviceGetComputeRunningProcesses_v2 and _v3.
typedef struct {
  unsigned int pid;
  unsigned long long usedGpuMemory;  // bytes, or NVML_VALUE_NOT_AVAILABLE
  unsigned int gpuInstanceId;        // 0xFFFFFFFF outside MIG
  unsigned int computeInstanceId;    // 0xFFFFFFFF outside MIG
} nvmlProcessInfo_t;
// The unversioned nvmlDeviceGetComputeRunningProcesses.
typedef struct {
  unsigned int pid;
  unsigned long long usedGpuMemory;
} nvmlProcessInfo_v1_t;

typedef enum { NVML_TEMPERATURE_GPU = 0 } nvmlTemperatureSensors_t;

typedef enum {
  NVML_CLOCK_GRAPHICS = 0,
  NVML_CLOCK_SM = 1,
  NVML_CLOCK_MEM = 2,
  NVML_CLOCK_VIDEO = 3
} nvmlClockType_t;

typedef enum {
  NVML_COMPUTEMODE_DEFAULT = 0,
  NVML_COMPUTEMODE_EXCLUSIVE_THREAD = 1,
  NVML_COMPUTEMODE_PROHIBITED = 2,
  NVML_COMPUTEMODE_EXCLUSIVE_PROCESS = 3
} nvmlComputeMode_t;

typedef int nvmlBrandType_t;  // NVML_BRAND_UNKNOWN = 0, ...: passed on as the server says

typedef enum {
  NVML_P2P_CAPS_INDEX_READ = 0,
  NVML_P2P_CAPS_INDEX_WRITE = 1,
  NVML_P2P_CAPS_INDEX_NVLINK = 2,
  NVML_P2P_CAPS_INDEX_ATOMICS = 3,
  NVML_P2P_CAPS_INDEX_PCI = 4,
  NVML_P2P_CAPS_INDEX_UNKNOWN = 5
} nvmlGpuP2PCapsIndex_t;

typedef enum {
  NVML_P2P_STATUS_OK = 0,
  NVML_P2P_STATUS_CHIPSET_NOT_SUPPORED = 1,
  NVML_P2P_STATUS_GPU_NOT_SUPPORTED = 2,
  NVML_P2P_STATUS_IOH_TOPOLOGY_NOT_SUPPORTED = 3,
  NVML_P2P_STATUS_DISABLED_BY_REGKEY = 4,
  NVML_P2P_STATUS_NOT_SUPPORTED = 5,
  NVML_P2P_STATUS_UNKNOWN = 6
} nvmlGpuP2PStatus_t;

}  // extern "C"

static_assert(sizeof(nvmlMemory_v2_t) == 40, "nvmlMemory_v2_t layout");
static_assert(sizeof(nvmlPciInfo_t) == 68, "nvmlPciInfo_t layout");
static_assert(sizeof(nvmlPciInfo_v1_t) == 52, "nvmlPciInfo_v1_t layout");
static_assert(sizeof(nvmlProcessInfo_t) == 24, "nvmlProcessInfo_t layout");
static_assert(sizeof(nvmlProcessInfo_v1_t) == 16, "nvmlProcessInfo_v1_t layout");

// rgpu's libnvidia-ml.so.1 answers nvmlErrorString(kRgpuNvmlMarkerCode) with kRgpuNvmlMarker;
// NVIDIA's answers an unknown code with its "Unknown Error" text.  rgpud asks so that it never
// reads rgpu's own NVML on a server (as it refuses rgpu's libcuda.so.1).  The code lies within
// nvmlReturn_t's range (0..1023, given NVML_ERROR_UNKNOWN = 999) but is no NVML code.
inline constexpr int kRgpuNvmlMarkerCode = 1019;
inline constexpr const char kRgpuNvmlMarker[] = "rgpu libnvidia-ml.so.1";
