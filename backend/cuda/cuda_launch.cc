#include "backend/cuda/cuda_launch.h"

#include <cstring>

namespace rgpu::backend {

bool to_cu_attributes(const std::vector<LaunchAttribute>& in, std::vector<CUlaunchAttribute>& out,
                      std::string& error) {
  out.clear();
  for (const LaunchAttribute& a : in) {
    CUlaunchAttribute c{};
    c.id = static_cast<CUlaunchAttributeID>(a.id);
    CUlaunchAttributeValue& v = c.value;
    const auto i32 = [](uint64_t x) { return static_cast<int>(static_cast<uint32_t>(x)); };
    switch (a.id) {
      case CU_LAUNCH_ATTRIBUTE_IGNORE:
        break;
      case CU_LAUNCH_ATTRIBUTE_ACCESS_POLICY_WINDOW: {
        v.accessPolicyWindow.base_ptr = reinterpret_cast<void*>(a.v[0]);
        v.accessPolicyWindow.num_bytes = a.v[1];
        const uint32_t bits = static_cast<uint32_t>(a.v[2]);
        std::memcpy(&v.accessPolicyWindow.hitRatio, &bits, sizeof bits);
        v.accessPolicyWindow.hitProp = static_cast<CUaccessProperty>(i32(a.v[3]));
        v.accessPolicyWindow.missProp = static_cast<CUaccessProperty>(i32(a.v[3] >> 32));
        break;
      }
      case CU_LAUNCH_ATTRIBUTE_COOPERATIVE:
        v.cooperative = i32(a.v[0]);
        break;
      case CU_LAUNCH_ATTRIBUTE_SYNCHRONIZATION_POLICY:
        v.syncPolicy = static_cast<CUsynchronizationPolicy>(i32(a.v[0]));
        break;
      case CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION:
        v.clusterDim.x = static_cast<unsigned>(a.v[0]);
        v.clusterDim.y = static_cast<unsigned>(a.v[1]);
        v.clusterDim.z = static_cast<unsigned>(a.v[2]);
        break;
      case CU_LAUNCH_ATTRIBUTE_CLUSTER_SCHEDULING_POLICY_PREFERENCE:
        v.clusterSchedulingPolicyPreference = static_cast<CUclusterSchedulingPolicy>(i32(a.v[0]));
        break;
      case CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION:
        v.programmaticStreamSerializationAllowed = i32(a.v[0]);
        break;
      case CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_EVENT:
        v.programmaticEvent.event = reinterpret_cast<CUevent>(a.v[0]);
        v.programmaticEvent.flags = i32(a.v[1]);
        v.programmaticEvent.triggerAtBlockStart = i32(a.v[2]);
        break;
      case CU_LAUNCH_ATTRIBUTE_PRIORITY:
        v.priority = i32(a.v[0]);
        break;
      case CU_LAUNCH_ATTRIBUTE_MEM_SYNC_DOMAIN_MAP:
        v.memSyncDomainMap.default_ = static_cast<unsigned char>(a.v[0]);
        v.memSyncDomainMap.remote = static_cast<unsigned char>(a.v[1]);
        break;
      case CU_LAUNCH_ATTRIBUTE_MEM_SYNC_DOMAIN:
        v.memSyncDomain = static_cast<CUlaunchMemSyncDomain>(i32(a.v[0]));
        break;
      case CU_LAUNCH_ATTRIBUTE_PREFERRED_CLUSTER_DIMENSION:
        v.preferredClusterDim.x = static_cast<unsigned>(a.v[0]);
        v.preferredClusterDim.y = static_cast<unsigned>(a.v[1]);
        v.preferredClusterDim.z = static_cast<unsigned>(a.v[2]);
        break;
      case CU_LAUNCH_ATTRIBUTE_LAUNCH_COMPLETION_EVENT:
        v.launchCompletionEvent.event = reinterpret_cast<CUevent>(a.v[0]);
        v.launchCompletionEvent.flags = i32(a.v[1]);
        break;
      case CU_LAUNCH_ATTRIBUTE_DEVICE_UPDATABLE_KERNEL_NODE:
        v.deviceUpdatableKernelNode.deviceUpdatable = i32(a.v[0]);
        break;
      case CU_LAUNCH_ATTRIBUTE_PREFERRED_SHARED_MEMORY_CARVEOUT:
        v.sharedMemCarveout = static_cast<unsigned>(a.v[0]);
        break;
      case CU_LAUNCH_ATTRIBUTE_NVLINK_UTIL_CENTRIC_SCHEDULING:
        v.nvlinkUtilCentricScheduling = static_cast<unsigned>(a.v[0]);
        break;
      default:
        error = "launch attribute " + std::to_string(a.id) + " is unknown to this rgpud";
        return false;
    }
    out.push_back(c);
  }
  return true;
}

CUlaunchConfig launch_config(const LaunchDims& d, CUstream stream,
                             std::vector<CUlaunchAttribute>& attrs) {
  CUlaunchConfig c{};
  c.gridDimX = d.grid[0], c.gridDimY = d.grid[1], c.gridDimZ = d.grid[2];
  c.blockDimX = d.block[0], c.blockDimY = d.block[1], c.blockDimZ = d.block[2];
  c.sharedMemBytes = d.shared_mem;
  c.hStream = stream;
  c.attrs = attrs.data();
  c.numAttrs = static_cast<unsigned>(attrs.size());
  return c;
}

}  // namespace rgpu::backend
