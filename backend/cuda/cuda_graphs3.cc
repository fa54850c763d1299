#include "backend/cuda/cuda_graphs3.h"

#include <cstring>
#include <string>
#include <vector>

#include "backend/cuda/cuda_launch.h"

namespace rgpu::backend {

Status cuda_check(const CudaDriver& drv, CUresult r) {
  if (r == CUDA_SUCCESS) return Status::success();
  return Status::fail(static_cast<CudaError>(r), drv.describe(r));
}

namespace {

Status check(const CudaDriver& drv, CUresult r) { return cuda_check(drv, r); }

uint64_t u32(int v) { return static_cast<uint32_t>(v); }

}  // namespace

Status cuda_stream_set_attribute(const CudaDriver& drv, CUstream stream, const LaunchAttribute& a) {
  std::vector<CUlaunchAttribute> cu;
  std::string error;
  if (!to_cu_attributes({a}, cu, error) || cu.size() != 1)
    return Status::fail(err::InvalidValue, error.empty() ? "bad stream attribute" : error);
  return check(drv, drv.cuStreamSetAttribute(stream, cu[0].id, &cu[0].value));
}

Status cuda_stream_get_attribute(const CudaDriver& drv, CUstream stream, LaunchAttribute& a) {
  CUstreamAttrValue v{};
  const auto id = static_cast<CUstreamAttrID>(a.id);
  if (Status s = check(drv, drv.cuStreamGetAttribute(stream, id, &v)); !s.ok()) return s;
  a.v[0] = a.v[1] = a.v[2] = a.v[3] = 0;
  switch (id) {
    case CU_LAUNCH_ATTRIBUTE_ACCESS_POLICY_WINDOW: {
      a.v[0] = reinterpret_cast<uint64_t>(v.accessPolicyWindow.base_ptr);
      a.v[1] = v.accessPolicyWindow.num_bytes;
      uint32_t bits;
      std::memcpy(&bits, &v.accessPolicyWindow.hitRatio, sizeof bits);
      a.v[2] = bits;
      a.v[3] = u32(v.accessPolicyWindow.hitProp) | u32(v.accessPolicyWindow.missProp) << 32;
      break;
    }
    case CU_LAUNCH_ATTRIBUTE_SYNCHRONIZATION_POLICY:
      a.v[0] = u32(v.syncPolicy);
      break;
    case CU_LAUNCH_ATTRIBUTE_PRIORITY:
      a.v[0] = u32(v.priority);
      break;
    case CU_LAUNCH_ATTRIBUTE_MEM_SYNC_DOMAIN_MAP:
      a.v[0] = v.memSyncDomainMap.default_;
      a.v[1] = v.memSyncDomainMap.remote;
      break;
    case CU_LAUNCH_ATTRIBUTE_MEM_SYNC_DOMAIN:
      a.v[0] = u32(v.memSyncDomain);
      break;
    default:
      return Status::fail(err::InvalidValue,
                          "stream attribute " + std::to_string(a.id) + " is unknown to this rgpud");
  }
  return Status::success();
}

}  // namespace rgpu::backend
