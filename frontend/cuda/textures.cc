// Texture and surface objects through the driver API.  An object is created on the server (its
// value is the server's CUtexObject / CUsurfObject, which kernels receive by value); the
// descriptors it was made from are kept here so that the getters answer without a round trip.
#include <bit>
#include <map>
#include <mutex>
#include <vector>

#include "frontend/cuda/arrays.h"

using namespace rgpu;
using rgpu::cuda_fe::core;
using rgpu::cuda_fe::to_driver;

namespace {

struct Record {
  int device;
  bool surface;
  CUDA_RESOURCE_DESC res;
  CUDA_TEXTURE_DESC tex;
  bool has_view;
  CUDA_RESOURCE_VIEW_DESC view;
};

std::mutex mu;
// By object value; values of different servers may coincide, so each holds a list.
std::map<uint64_t, std::vector<Record>>& records() {
  static auto* r = new std::map<uint64_t, std::vector<Record>>;
  return *r;
}

// The record of `object` (the current context's device's first), or null.  Under `mu`.
Record* find(uint64_t object, bool surface) {
  auto it = records().find(object);
  if (it == records().end()) return nullptr;
  int dev = -1;
  if (cuda_fe::current_device(&dev) != err::Success) dev = -1;
  Record* any = nullptr;
  for (Record& r : it->second) {
    if (r.surface != surface) continue;
    if (r.device == dev) return &r;
    if (!any) any = &r;
  }
  return any;
}

CUresult resource(const CUDA_RESOURCE_DESC* res, proto::TexCreateReq* q) {
  q->res_type = static_cast<uint32_t>(res->resType);  // CUresourcetype numbers: the runtime's
  switch (res->resType) {
    case CU_RESOURCE_TYPE_ARRAY:
      q->array = cuda_fe::array_id(res->res.array.hArray);
      return q->array ? CUDA_SUCCESS : CUDA_ERROR_INVALID_HANDLE;
    case CU_RESOURCE_TYPE_MIPMAPPED_ARRAY:
      q->array = cuda_fe::mipmapped_id(res->res.mipmap.hMipmappedArray);
      return q->array ? CUDA_SUCCESS : CUDA_ERROR_INVALID_HANDLE;
    case CU_RESOURCE_TYPE_LINEAR:
      q->format = res->res.linear.format, q->channels = res->res.linear.numChannels;
      if (!client::array_element_bytes(q->format, q->channels)) return CUDA_ERROR_INVALID_VALUE;
      q->ptr = res->res.linear.devPtr;
      q->width = res->res.linear.sizeInBytes;
      return CUDA_SUCCESS;
    case CU_RESOURCE_TYPE_PITCH2D:
      q->format = res->res.pitch2D.format, q->channels = res->res.pitch2D.numChannels;
      if (!client::array_element_bytes(q->format, q->channels)) return CUDA_ERROR_INVALID_VALUE;
      q->ptr = res->res.pitch2D.devPtr;
      q->width = res->res.pitch2D.width;
      q->height = res->res.pitch2D.height;
      q->pitch = res->res.pitch2D.pitchInBytes;
      return CUDA_SUCCESS;
  }
  return CUDA_ERROR_INVALID_VALUE;
}

CUresult create(bool surface, uint64_t* out, const CUDA_RESOURCE_DESC* res,
                const CUDA_TEXTURE_DESC* tex, const CUDA_RESOURCE_VIEW_DESC* view) {
  RGPU_INIT();
  int dev = 0;
  if (client::Error e = cuda_fe::current_device(&dev); e != err::Success) return to_driver(e);
  if (!out || !res || (!surface && !tex)) return CUDA_ERROR_INVALID_VALUE;
  proto::TexCreateReq q;
  q.surface = surface;
  if (CUresult r = resource(res, &q); r != CUDA_SUCCESS) return r;
  if (surface && res->resType != CU_RESOURCE_TYPE_ARRAY) return CUDA_ERROR_INVALID_VALUE;
  if (tex) {
    q.address_mode0 = tex->addressMode[0], q.address_mode1 = tex->addressMode[1];
    q.address_mode2 = tex->addressMode[2], q.filter_mode = tex->filterMode;
    q.flags = tex->flags;
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
    q.view = 1, q.view_format = view->format;  // CUresourceViewFormat: the runtime's numbers
    q.view_width = view->width, q.view_height = view->height, q.view_depth = view->depth;
    q.first_level = view->firstMipmapLevel, q.last_level = view->lastMipmapLevel;
    q.first_layer = view->firstLayer, q.last_layer = view->lastLayer;
  }
  uint64_t object = 0;
  if (CUresult r = to_driver(core().texture_create(dev, q, &object)); r != CUDA_SUCCESS) return r;
  Record rec{dev,
             surface,
             *res,
             tex ? *tex : CUDA_TEXTURE_DESC{},
             view != nullptr,
             view ? *view : CUDA_RESOURCE_VIEW_DESC{}};
  {
    std::lock_guard<std::mutex> lock(mu);
    records()[object].push_back(rec);
  }
  *out = object;
  return CUDA_SUCCESS;
}

CUresult destroy(bool surface, uint64_t object) {
  RGPU_INIT();
  int dev;
  {
    std::lock_guard<std::mutex> lock(mu);
    Record* r = find(object, surface);
    if (!r) return CUDA_ERROR_INVALID_VALUE;
    dev = r->device;
    auto& list = records()[object];
    list.erase(list.begin() + (r - list.data()));
    if (list.empty()) records().erase(object);
  }
  return to_driver(core().texture_destroy(dev, surface, object));
}

template <class T, class F>
CUresult get(bool surface, uint64_t object, T* out, F field) {
  RGPU_INIT();
  if (!out) return CUDA_ERROR_INVALID_VALUE;
  std::lock_guard<std::mutex> lock(mu);
  Record* r = find(object, surface);
  if (!r) return CUDA_ERROR_INVALID_VALUE;
  return field(*r, out);
}

}  // namespace

RGPU_CU CUresult cuTexObjectCreate(CUtexObject* pTexObject, const CUDA_RESOURCE_DESC* pResDesc,
                                   const CUDA_TEXTURE_DESC* pTexDesc,
                                   const CUDA_RESOURCE_VIEW_DESC* pResViewDesc) {
  static_assert(sizeof(CUtexObject) == sizeof(uint64_t));
  return create(false, reinterpret_cast<uint64_t*>(pTexObject), pResDesc, pTexDesc, pResViewDesc);
}
RGPU_CU CUresult cuTexObjectDestroy(CUtexObject texObject) { return destroy(false, texObject); }
RGPU_CU CUresult cuTexObjectGetResourceDesc(CUDA_RESOURCE_DESC* pResDesc, CUtexObject texObject) {
  return get(false, texObject, pResDesc, [](const Record& r, CUDA_RESOURCE_DESC* o) {
    *o = r.res;
    return CUDA_SUCCESS;
  });
}
RGPU_CU CUresult cuTexObjectGetTextureDesc(CUDA_TEXTURE_DESC* pTexDesc, CUtexObject texObject) {
  return get(false, texObject, pTexDesc, [](const Record& r, CUDA_TEXTURE_DESC* o) {
    *o = r.tex;
    return CUDA_SUCCESS;
  });
}
RGPU_CU CUresult cuTexObjectGetResourceViewDesc(CUDA_RESOURCE_VIEW_DESC* pResViewDesc,
                                                CUtexObject texObject) {
  return get(false, texObject, pResViewDesc, [](const Record& r, CUDA_RESOURCE_VIEW_DESC* o) {
    if (!r.has_view) return CUDA_ERROR_INVALID_VALUE;  // made without a view
    *o = r.view;
    return CUDA_SUCCESS;
  });
}
RGPU_CU CUresult cuSurfObjectCreate(CUsurfObject* pSurfObject, const CUDA_RESOURCE_DESC* pResDesc) {
  static_assert(sizeof(CUsurfObject) == sizeof(uint64_t));
  return create(true, reinterpret_cast<uint64_t*>(pSurfObject), pResDesc, nullptr, nullptr);
}
RGPU_CU CUresult cuSurfObjectDestroy(CUsurfObject surfObject) { return destroy(true, surfObject); }
RGPU_CU CUresult cuSurfObjectGetResourceDesc(CUDA_RESOURCE_DESC* pResDesc,
                                             CUsurfObject surfObject) {
  return get(true, surfObject, pResDesc, [](const Record& r, CUDA_RESOURCE_DESC* o) {
    *o = r.res;
    return CUDA_SUCCESS;
  });
}
