// Stream attributes in the driver API (cuStreamSetAttribute / GetAttribute / CopyAttributes and
// their _ptsz forms): the five attributes a stream has, encoded as launch attributes are on the
// wire (the numbering is the driver's, which the runtime's shares), on the client core's
// stream_attribute (client/graphs3.cc), as the runtime's cudaStream*Attribute do.
#include <cstring>

#include "common/log.h"
#include "frontend/cuda/api.h"

using namespace rgpu;
using rgpu::cuda_fe::core;
using rgpu::cuda_fe::to_driver;

namespace {

using Attr = client::Client::LaunchAttribute;
uint64_t u32(int v) { return static_cast<uint32_t>(v); }

int raw(CUstreamAttrID id) {
  int v;
  static_assert(sizeof v == sizeof id);
  std::memcpy(&v, &id, sizeof v);
  return v;
}

bool encode(int id, const CUstreamAttrValue& v, Attr& a) {
  a = Attr{};
  a.id = static_cast<uint32_t>(id);
  switch (id) {
    case CU_LAUNCH_ATTRIBUTE_ACCESS_POLICY_WINDOW: {
      a.v[0] = reinterpret_cast<uint64_t>(v.accessPolicyWindow.base_ptr);
      a.v[1] = v.accessPolicyWindow.num_bytes;
      uint32_t bits;
      std::memcpy(&bits, &v.accessPolicyWindow.hitRatio, sizeof bits);
      a.v[2] = bits;
      a.v[3] = u32(v.accessPolicyWindow.hitProp) | u32(v.accessPolicyWindow.missProp) << 32;
      return true;
    }
    case CU_LAUNCH_ATTRIBUTE_SYNCHRONIZATION_POLICY:
      a.v[0] = u32(v.syncPolicy);
      return true;
    case CU_LAUNCH_ATTRIBUTE_PRIORITY:
      a.v[0] = u32(v.priority);
      return true;
    case CU_LAUNCH_ATTRIBUTE_MEM_SYNC_DOMAIN_MAP:
      a.v[0] = v.memSyncDomainMap.default_;
      a.v[1] = v.memSyncDomainMap.remote;
      return true;
    case CU_LAUNCH_ATTRIBUTE_MEM_SYNC_DOMAIN:
      a.v[0] = u32(v.memSyncDomain);
      return true;
    default:
      return false;
  }
}

void decode(const Attr& a, CUstreamAttrValue& v) {
  const auto i32 = [](uint64_t x) { return static_cast<int>(static_cast<uint32_t>(x)); };
  switch (a.id) {
    case CU_LAUNCH_ATTRIBUTE_ACCESS_POLICY_WINDOW: {
      v.accessPolicyWindow.base_ptr = reinterpret_cast<void*>(a.v[0]);
      v.accessPolicyWindow.num_bytes = a.v[1];
      const uint32_t bits = static_cast<uint32_t>(a.v[2]);
      std::memcpy(&v.accessPolicyWindow.hitRatio, &bits, sizeof bits);
      v.accessPolicyWindow.hitProp = static_cast<CUaccessProperty>(i32(a.v[3]));
      v.accessPolicyWindow.missProp = static_cast<CUaccessProperty>(i32(a.v[3] >> 32));
      break;
    }
    case CU_LAUNCH_ATTRIBUTE_SYNCHRONIZATION_POLICY:
      v.syncPolicy = static_cast<CUsynchronizationPolicy>(i32(a.v[0]));
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
    default:
      break;
  }
}

CUresult set_attr(CUstream st, CUstreamAttrID id, const CUstreamAttrValue* v, bool pt) {
  RGPU_INIT();
  if (!v) return CUDA_ERROR_INVALID_VALUE;
  Attr a;
  if (!encode(raw(id), *v, a)) {
    LOG_WARN("rgpu: stream attribute %d does not exist", raw(id));
    return CUDA_ERROR_INVALID_VALUE;
  }
  client::Stream s;
  if (client::Error e = cuda_fe::stream_of(st, pt, &s); e != err::Success) return to_driver(e);
  return to_driver(core().stream_attribute(s, 0, a, nullptr));
}

CUresult get_attr(CUstream st, CUstreamAttrID id, CUstreamAttrValue* v, bool pt) {
  RGPU_INIT();
  if (!v) return CUDA_ERROR_INVALID_VALUE;
  Attr a;
  const CUstreamAttrValue zero{};
  if (!encode(raw(id), zero, a)) {
    LOG_WARN("rgpu: stream attribute %d does not exist", raw(id));
    return CUDA_ERROR_INVALID_VALUE;
  }
  client::Stream s;
  if (client::Error e = cuda_fe::stream_of(st, pt, &s); e != err::Success) return to_driver(e);
  if (client::Error e = core().stream_attribute(s, 1, a, nullptr); e != err::Success)
    return to_driver(e);
  decode(a, *v);
  return CUDA_SUCCESS;
}

CUresult copy_attrs(CUstream dst, CUstream src, bool pt) {
  RGPU_INIT();
  client::Stream d, s;
  if (client::Error e = cuda_fe::stream_of(dst, pt, &d); e != err::Success) return to_driver(e);
  if (client::Error e = cuda_fe::stream_of(src, pt, &s); e != err::Success) return to_driver(e);
  Attr unused;
  return to_driver(core().stream_attribute(d, 2, unused, &s));
}

}  // namespace

RGPU_CU CUresult cuStreamSetAttribute(CUstream st, CUstreamAttrID id, const CUstreamAttrValue* v) {
  return set_attr(st, id, v, false);
}
RGPU_CU CUresult cuStreamSetAttribute_ptsz(CUstream st, CUstreamAttrID id,
                                           const CUstreamAttrValue* v) {
  return set_attr(st, id, v, true);
}
RGPU_CU CUresult cuStreamGetAttribute(CUstream st, CUstreamAttrID id, CUstreamAttrValue* v) {
  return get_attr(st, id, v, false);
}
RGPU_CU CUresult cuStreamGetAttribute_ptsz(CUstream st, CUstreamAttrID id, CUstreamAttrValue* v) {
  return get_attr(st, id, v, true);
}
RGPU_CU CUresult cuStreamCopyAttributes(CUstream dst, CUstream src) {
  return copy_attrs(dst, src, false);
}
RGPU_CU CUresult cuStreamCopyAttributes_ptsz(CUstream dst, CUstream src) {
  return copy_attrs(dst, src, true);
}
