// One launch attribute of a program (the runtime's cudaLaunchAttribute or the driver's
// CUlaunchAttribute: the same ids and the same value layout) in the client core's terms. Shared by
// both front-ends; header-only, so each library compiles its own copy and no symbol is shared.
#pragma once

#include <cuda.h>

#include <cstdint>
#include <cstring>

#include "client/client.h"

namespace rgpu::frontend {

// `id` is the number the program stored (it may be no enumerator at all: read it as an int, not
// as the enum). `v` is the value union (cudaLaunchAttributeValue or CUlaunchAttributeValue);
// `event_of` maps its event handle to the core's Event. False for an id rgpu does not know.
template <class Value, class EventOf>
bool launch_attribute(int id, const Value& v, client::Client::LaunchAttribute& out,
                      EventOf event_of) {
  auto u32 = [](auto x) { return static_cast<uint64_t>(static_cast<uint32_t>(x)); };
  out = client::Client::LaunchAttribute{};
  out.id = static_cast<uint32_t>(id);
  switch (id) {
    case CU_LAUNCH_ATTRIBUTE_ACCESS_POLICY_WINDOW: {
      out.v[0] = reinterpret_cast<uint64_t>(v.accessPolicyWindow.base_ptr);
      out.v[1] = v.accessPolicyWindow.num_bytes;
      uint32_t bits;
      std::memcpy(&bits, &v.accessPolicyWindow.hitRatio, sizeof bits);
      out.v[2] = bits;
      out.v[3] = u32(v.accessPolicyWindow.hitProp) | u32(v.accessPolicyWindow.missProp) << 32;
      return true;
    }
    case CU_LAUNCH_ATTRIBUTE_COOPERATIVE:
      out.v[0] = u32(v.cooperative);
      return true;
    case CU_LAUNCH_ATTRIBUTE_SYNCHRONIZATION_POLICY:
      out.v[0] = u32(v.syncPolicy);
      return true;
    case CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION:
      out.v[0] = v.clusterDim.x, out.v[1] = v.clusterDim.y, out.v[2] = v.clusterDim.z;
      return true;
    case CU_LAUNCH_ATTRIBUTE_CLUSTER_SCHEDULING_POLICY_PREFERENCE:
      out.v[0] = u32(v.clusterSchedulingPolicyPreference);
      return true;
    case CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION:
      out.v[0] = u32(v.programmaticStreamSerializationAllowed);
      return true;
    case CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_EVENT:
      out.event = event_of(v.programmaticEvent.event);
      out.v[1] = u32(v.programmaticEvent.flags);
      out.v[2] = u32(v.programmaticEvent.triggerAtBlockStart);
      return true;
    case CU_LAUNCH_ATTRIBUTE_PRIORITY:
      out.v[0] = u32(v.priority);
      return true;
    case CU_LAUNCH_ATTRIBUTE_MEM_SYNC_DOMAIN_MAP:
      out.v[0] = v.memSyncDomainMap.default_, out.v[1] = v.memSyncDomainMap.remote;
      return true;
    case CU_LAUNCH_ATTRIBUTE_MEM_SYNC_DOMAIN:
      out.v[0] = u32(v.memSyncDomain);
      return true;
    case CU_LAUNCH_ATTRIBUTE_PREFERRED_CLUSTER_DIMENSION:
      out.v[0] = v.preferredClusterDim.x, out.v[1] = v.preferredClusterDim.y;
      out.v[2] = v.preferredClusterDim.z;
      return true;
    case CU_LAUNCH_ATTRIBUTE_LAUNCH_COMPLETION_EVENT:
      out.event = event_of(v.launchCompletionEvent.event);
      out.v[1] = u32(v.launchCompletionEvent.flags);
      return true;
    case CU_LAUNCH_ATTRIBUTE_DEVICE_UPDATABLE_KERNEL_NODE:
      out.v[0] = u32(v.deviceUpdatableKernelNode.deviceUpdatable);
      return true;
    case CU_LAUNCH_ATTRIBUTE_PREFERRED_SHARED_MEMORY_CARVEOUT:
      out.v[0] = v.sharedMemCarveout;
      return true;
    case CU_LAUNCH_ATTRIBUTE_NVLINK_UTIL_CENTRIC_SCHEDULING:
      out.v[0] = v.nvlinkUtilCentricScheduling;
      return true;
    default:
      return false;
  }
}

}  // namespace rgpu::frontend
