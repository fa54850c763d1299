// Messages of the device-and-memory group (issue 11 items 6, 7, 10): context settings forwarded to
// the server's context (limits, cache and shared-memory configuration, profiler, persisting L2,
// P2P attributes), and the kernels' stderr (device assert) pushed to the client.
//
// proto/messages.h includes this inside namespace rgpu::proto, after its own includes and
// structs (so RGPU_FIELDS, <cstdint> and <vector> are there); include proto/messages.h, not this.
#pragma once

// What DeviceConfig does; `key` and `value` depend on it.
enum class DeviceConfigOp : uint32_t {
  SetLimit = 1,            // key: cudaLimit, value: the new value
  GetLimit = 2,            // key: cudaLimit; reply: the value
  SetCacheConfig = 3,      // value: cudaFuncCache
  GetCacheConfig = 4,      // reply: cudaFuncCache
  SetSharedMemConfig = 5,  // value: cudaSharedMemConfig
  GetSharedMemConfig = 6,  // reply: cudaSharedMemConfig
  ProfilerStart = 7,
  ProfilerStop = 8,
  ResetPersistingL2 = 9,
  P2PAttribute = 10,  // key: cudaDeviceP2PAttr, value: the peer GPU; reply: the attribute
};

struct DeviceConfigReq {
  uint32_t device = 0;
  uint32_t op = 0;  // DeviceConfigOp
  uint32_t key = 0;
  uint64_t value = 0;
  RGPU_FIELDS(device, op, key, value)
};
struct DeviceConfigRep {
  uint64_t value = 0;
  RGPU_FIELDS(value)
};

// What kernels wrote to stderr (device assert messages), written by the client to its stderr.
struct DeviceStderrMsg {
  std::vector<uint8_t> bytes;
  RGPU_FIELDS(bytes)
};
