// Messages of launches with attributes (issue 11, item 5): cudaLaunchKernelExC's attributes,
// cooperative launches, and the cluster / shared-memory occupancy queries.  Plain launches keep
// the smaller Launch message.
//
// Included once by proto/messages.h, inside namespace rgpu::proto, after the messages it builds on
// (LaunchReq, FuncReq, Empty): not a header to include elsewhere.
#pragma once

// One launch attribute (CUlaunchAttributeID numbering, which the runtime's shares).  Values by id:
//   1 access policy window: v0 base pointer, v1 bytes, v2 hit ratio (float bits), v3 hit property
//     | miss property << 32
//   2 cooperative, 3 synchronization policy, 5 cluster scheduling policy, 6 programmatic stream
//     serialization, 8 priority, 10 memsync domain, 13 device updatable, 14 shared memory
//     carveout, 16 NVLink-centric scheduling: v0
//   4 cluster dimension, 11 preferred cluster dimension: v0 x, v1 y, v2 z
//   7 programmatic event: v0 event (the client's id), v1 flags, v2 trigger at block start
//   9 memsync domain map: v0 default, v1 remote
//   12 launch completion event: v0 event (the client's id), v1 flags
struct LaunchAttr {
  uint32_t id = 0;
  uint64_t v0 = 0, v1 = 0, v2 = 0, v3 = 0;
  RGPU_FIELDS(id, v0, v1, v2, v3)
};

struct LaunchExReq {
  LaunchReq launch;
  std::vector<LaunchAttr> attrs;
  RGPU_FIELDS(launch, attrs)
};
using LaunchExRep = Empty;

// cudaOccupancyMaxActiveClusters (query 0) and cudaOccupancyMaxPotentialClusterSize (query 1) for
// a launch configuration.
struct OccupancyClusterReq {
  FuncReq func;
  uint32_t query = 0;
  uint32_t gx = 1, gy = 1, gz = 1;
  uint32_t bx = 1, by = 1, bz = 1;
  uint32_t shared_mem = 0;
  std::vector<LaunchAttr> attrs;
  RGPU_FIELDS(func, query, gx, gy, gz, bx, by, bz, shared_mem, attrs)
};
struct OccupancyClusterRep {
  int32_t value = 0;
  RGPU_FIELDS(value)
};

// cudaOccupancyAvailableDynamicSMemPerBlock.
struct OccupancyDynamicSmemReq {
  FuncReq func;
  int32_t blocks = 0;
  int32_t block_size = 0;
  RGPU_FIELDS(func, blocks, block_size)
};
struct OccupancyDynamicSmemRep {
  uint64_t bytes = 0;
  RGPU_FIELDS(bytes)
};
