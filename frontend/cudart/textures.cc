// Texture and surface objects (issue 11, item 2).  An object is created on the server (its value
// is the server's CUtexObject / CUsurfObject, which kernels receive by value); the descriptors it
// was made from are kept here so that the getters answer without a round trip.
#include <bit>
#include <map>
#include <mutex>
#include <vector>

#include "common/log.h"
#include "frontend/cudart/arrays.h"

using namespace rgpu;
using rgpu::cudart::array_id;
using rgpu::cudart::core;
using rgpu::cudart::mipmapped_id;
using rgpu::cudart::ret;

namespace {

struct Record {
  int device;
  bool surface;
  cudaResourceDesc res;
  cudaTextureDesc tex;
  bool has_view;
  cudaResourceViewDesc view;
};

std::mutex mu;
// By object value; values of different servers may coincide, so each holds a list.
std::map<uint64_t, std::vector<Record>>& records() {
  static auto* r = new std::map<uint64_t, std::vector<Record>>;
  return *r;
}

// The record of `object` (the current device's first), or null.
Record* find(uint64_t object, bool surface) {
  auto it = records().find(object);
  if (it == records().end()) return nullptr;
  int dev = core().current_device();
  Record* any = nullptr;
  for (Record& r : it->second) {
    if (r.surface != surface) continue;
    if (r.device == dev) return &r;
    if (!any) any = &r;
  }
  return any;
}

CudaError resource(const cudaResourceDesc* res, proto::TexCreateReq* q) {
  q->res_type = static_cast<uint32_t>(res->resType);
  switch (res->resType) {
    case cudaResourceTypeArray:
      q->array = array_id(res->res.array.array);
      return q->array ? err::Success : client::errc::InvalidResourceHandle;
    case cudaResourceTypeMipmappedArray:
      q->array = mipmapped_id(res->res.mipmap.mipmap);
      return q->array ? err::Success : client::errc::InvalidResourceHandle;
    case cudaResourceTypeLinear:
      if (!cudart::driver_format(res->res.linear.desc, &q->format, &q->channels))
        return static_cast<CudaError>(cudaErrorInvalidChannelDescriptor);
      q->ptr = reinterpret_cast<uint64_t>(res->res.linear.devPtr);
      q->width = res->res.linear.sizeInBytes;
      return err::Success;
    case cudaResourceTypePitch2D:
      if (!cudart::driver_format(res->res.pitch2D.desc, &q->format, &q->channels))
        return static_cast<CudaError>(cudaErrorInvalidChannelDescriptor);
      q->ptr = reinterpret_cast<uint64_t>(res->res.pitch2D.devPtr);
      q->width = res->res.pitch2D.width;
      q->height = res->res.pitch2D.height;
      q->pitch = res->res.pitch2D.pitchInBytes;
      return err::Success;
    default:
      return err::InvalidValue;
  }
}

// Whether the resource's elements are integers (cudaReadModeElementType reads them as such).
bool integer_format(const cudaResourceDesc* res, const proto::TexCreateReq& q) {
  if (res->resType == cudaResourceTypeLinear || res->resType == cudaResourceTypePitch2D)
    return q.format != 0x10 && q.format != 0x20;
  client::Client::ArrayRecord r;
  if (!core().array_record(q.array, res->resType == cudaResourceTypeMipmappedArray, &r))
    return false;
  return r.desc.format != 0x10 && r.desc.format != 0x20;
}

cudaError_t create(bool surface, uint64_t* out, const cudaResourceDesc* res,
                   const cudaTextureDesc* tex, const cudaResourceViewDesc* view) {
  if (!out || !res || (!surface && !tex)) return ret(err::InvalidValue);
  proto::TexCreateReq q;
  q.surface = surface;
  if (CudaError e = resource(res, &q); e != err::Success) return ret(e);
  if (surface && res->resType != cudaResourceTypeArray) return ret(err::InvalidValue);
  if (tex) {
    q.address_mode0 = tex->addressMode[0], q.address_mode1 = tex->addressMode[1];
    q.address_mode2 = tex->addressMode[2], q.filter_mode = tex->filterMode;
    if (tex->readMode == cudaReadModeElementType && integer_format(res, q)) q.flags |= 0x01;
    if (tex->normalizedCoords) q.flags |= 0x02;  // CU_TRSF_NORMALIZED_COORDINATES
    if (tex->sRGB) q.flags |= 0x10;              // CU_TRSF_SRGB
    if (tex->disableTrilinearOptimization) q.flags |= 0x20;
    if (tex->seamlessCubemap) q.flags |= 0x40;  // CU_TRSF_SEAMLESS_CUBEMAP
    q.max_anisotropy = tex->maxAnisotropy, q.mipmap_filter_mode = tex->mipmapFilterMode;
    q.mipmap_bias = std::bit_cast<uint32_t>(tex->mipmapLevelBias);
    q.min_lod = std::bit_cast<uint32_t>(tex->minMipmapLevelClamp);
    q.max_lod = std::bit_cast<uint32_t>(tex->maxMipmapLevelClamp);
    q.border0 = std::bit_cast<uint32_t>(tex->borderColor[0]);
    q.border1 = std::bit_cast<uint32_t>(tex->borderColor[1]);
    q.border2 = std::bit_cast<uint32_t>(tex->borderColor[2]);
    q.border3 = std::bit_cast<uint32_t>(tex->borderColor[3]);
  }
  if (view) {
    q.view = 1, q.view_format = view->format;
    q.view_width = view->width, q.view_height = view->height, q.view_depth = view->depth;
    q.first_level = view->firstMipmapLevel, q.last_level = view->lastMipmapLevel;
    q.first_layer = view->firstLayer, q.last_layer = view->lastLayer;
  }
  int dev = core().current_device();
  uint64_t object = 0;
  if (CudaError e = core().texture_create(dev, q, &object); e != err::Success) return ret(e);
  Record r{dev,
           surface,
           *res,
           tex ? *tex : cudaTextureDesc{},
           view != nullptr,
           view ? *view : cudaResourceViewDesc{}};
  {
    std::lock_guard<std::mutex> lock(mu);
    records()[object].push_back(r);
  }
  *out = object;
  return cudaSuccess;
}

cudaError_t destroy(bool surface, uint64_t object) {
  if (object == 0) return cudaSuccess;  // as CUDA: destroying the null object succeeds
  int dev;
  {
    std::lock_guard<std::mutex> lock(mu);
    Record* r = find(object, surface);
    if (!r) return ret(err::InvalidValue);
    dev = r->device;
    auto& list = records()[object];
    list.erase(list.begin() + (r - list.data()));
    if (list.empty()) records().erase(object);
  }
  return ret(core().texture_destroy(dev, surface, object));
}

template <class T, class F>
cudaError_t get(bool surface, uint64_t object, T* out, F field) {
  if (!out) return ret(err::InvalidValue);
  std::lock_guard<std::mutex> lock(mu);
  Record* r = find(object, surface);
  if (!r) return ret(err::InvalidValue);
  return field(*r, out);
}

}  // namespace

extern "C" {

cudaError_t cudaCreateTextureObject(cudaTextureObject_t* pTexObject,
                                    const struct cudaResourceDesc* pResDesc,
                                    const struct cudaTextureDesc* pTexDesc,
                                    const struct cudaResourceViewDesc* pResViewDesc) {
  return create(false, reinterpret_cast<uint64_t*>(pTexObject), pResDesc, pTexDesc, pResViewDesc);
}
cudaError_t cudaDestroyTextureObject(cudaTextureObject_t texObject) {
  return destroy(false, texObject);
}
cudaError_t cudaGetTextureObjectResourceDesc(struct cudaResourceDesc* pResDesc,
                                             cudaTextureObject_t texObject) {
  return get(false, texObject, pResDesc, [](const Record& r, cudaResourceDesc* o) {
    *o = r.res;
    return cudaSuccess;
  });
}
cudaError_t cudaGetTextureObjectTextureDesc(struct cudaTextureDesc* pTexDesc,
                                            cudaTextureObject_t texObject) {
  return get(false, texObject, pTexDesc, [](const Record& r, cudaTextureDesc* o) {
    *o = r.tex;
    return cudaSuccess;
  });
}
cudaError_t cudaGetTextureObjectResourceViewDesc(struct cudaResourceViewDesc* pResViewDesc,
                                                 cudaTextureObject_t texObject) {
  return get(false, texObject, pResViewDesc, [](const Record& r, cudaResourceViewDesc* o) {
    if (!r.has_view) return ret(err::InvalidValue);  // made without a view
    *o = r.view;
    return cudaSuccess;
  });
}
cudaError_t cudaCreateSurfaceObject(cudaSurfaceObject_t* pSurfObject,
                                    const struct cudaResourceDesc* pResDesc) {
  return create(true, reinterpret_cast<uint64_t*>(pSurfObject), pResDesc, nullptr, nullptr);
}
cudaError_t cudaDestroySurfaceObject(cudaSurfaceObject_t surfObject) {
  return destroy(true, surfObject);
}
cudaError_t cudaGetSurfaceObjectResourceDesc(struct cudaResourceDesc* pResDesc,
                                             cudaSurfaceObject_t surfObject) {
  return get(true, surfObject, pResDesc, [](const Record& r, cudaResourceDesc* o) {
    *o = r.res;
    return cudaSuccess;
  });
}

}  // extern "C"
