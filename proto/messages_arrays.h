// Messages of CUDA arrays, texture and surface objects (issue 11, item 2).  Included from
// proto/messages.h; ids 0x0B00-0x0BFF (proto/catalogue.def).  Arrays are named by ids the client
// chooses (never 0); formats, flags and descriptors are in the driver's terms (CUarray_format,
// CUDA_ARRAY3D_* flags, CUaddress_mode, CU_TRSF_* flags, CUresourceViewFormat): the client
// translates the runtime's.  Floats travel as their IEEE-754 bit patterns.
#pragma once

#include <cstdint>
#include <vector>

#include "proto/wire.h"

namespace rgpu::proto {

// ---- arrays
// A new array (`levels` 0) or mipmapped array (`levels` >= 1) of `width` x `height` x `depth`
// elements (0 for a missing dimension, as CUDA_ARRAY3D_DESCRIPTOR; layers in `depth` for layered
// and cubemap arrays) of `channels` components of `format`.
struct ArrayCreateReq {
  uint32_t device = 0;
  uint64_t id = 0;
  uint64_t width = 0, height = 0, depth = 0;
  uint32_t format = 0, channels = 0, flags = 0, levels = 0;
  RGPU_FIELDS(device, id, width, height, depth, format, channels, flags, levels)
};
using ArrayCreateRep = Empty;
// Names level `level` of mipmapped array `id` as array `level_id` (owned by the mipmapped array).
struct ArrayLevelReq {
  uint32_t device = 0;
  uint64_t id = 0;
  uint32_t level = 0;
  uint64_t level_id = 0;
  RGPU_FIELDS(device, id, level, level_id)
};
using ArrayLevelRep = Empty;
struct ArrayDestroyReq {
  uint32_t device = 0;
  uint64_t id = 0;
  RGPU_FIELDS(device, id)
};
using ArrayDestroyRep = Empty;

// One side of a copy: array `array` (non-zero), or linear device memory at `ptr` with rows
// `pitch` bytes apart and slices `slice_rows` rows apart; the box starts `x` bytes, `y` rows and
// `z` slices (layers) in.
struct ArrayCopyReq {
  uint32_t device = 0;
  uint64_t stream = 0;
  uint64_t src_array = 0, src_ptr = 0, src_pitch = 0, src_rows = 0, src_x = 0, src_y = 0, src_z = 0;
  uint64_t dst_array = 0, dst_ptr = 0, dst_pitch = 0, dst_rows = 0, dst_x = 0, dst_y = 0, dst_z = 0;
  uint64_t width = 0, height = 0, depth = 0;  // bytes, rows, slices
  RGPU_FIELDS(device, stream, src_array, src_ptr, src_pitch, src_rows, src_x, src_y, src_z,
              dst_array, dst_ptr, dst_pitch, dst_rows, dst_x, dst_y, dst_z, width, height, depth)
};
using ArrayCopyRep = Empty;

// What ArrayQuery asks.
enum class ArrayQueryOp : uint32_t {
  MemoryRequirements = 1,  // reply: size, alignment
  SparseProperties = 2,    // reply: tile width, height, depth, miptail first level, size, flags
};
// ArrayQuery's ops: 1 memory requirements, 2 sparse properties, 3 (kQueryTexture1DLinearMaxWidth)
// the device's widest 1-D linear texture, in elements, for `id` = CUarray_format | channels << 32
// (no array involved).
constexpr uint32_t kQueryTexture1DLinearMaxWidth = 3;
struct ArrayQueryReq {
  uint32_t device = 0;
  uint64_t id = 0;
  uint32_t op = 0;
  RGPU_FIELDS(device, id, op)
};
struct ArrayQueryRep {
  std::vector<uint64_t> values;
  RGPU_FIELDS(values)
};

// A texture (`surface` 0) or surface (1) object.  Resource: `res_type` CUresourcetype (0 array,
// 1 mipmapped array, 2 linear, 3 pitch2D); `array` the array id for types 0 and 1, else `ptr`,
// `format`, `channels`, `width` (bytes for linear), `height`, `pitch`.
struct TexCreateReq {
  uint32_t device = 0;
  uint32_t surface = 0;
  uint32_t res_type = 0;
  uint64_t array = 0, ptr = 0;
  uint32_t format = 0, channels = 0;
  uint64_t width = 0, height = 0, pitch = 0;
  // CUDA_TEXTURE_DESC
  uint32_t address_mode0 = 0, address_mode1 = 0, address_mode2 = 0, filter_mode = 0, flags = 0,
           max_anisotropy = 0, mipmap_filter_mode = 0, mipmap_bias = 0, min_lod = 0, max_lod = 0;
  uint32_t border0 = 0, border1 = 0, border2 = 0, border3 = 0;
  // CUDA_RESOURCE_VIEW_DESC (`view` 1 when given)
  uint32_t view = 0, view_format = 0;
  uint64_t view_width = 0, view_height = 0, view_depth = 0;
  uint32_t first_level = 0, last_level = 0, first_layer = 0, last_layer = 0;
  RGPU_FIELDS(device, surface, res_type, array, ptr, format, channels, width, height, pitch,
              address_mode0, address_mode1, address_mode2, filter_mode, flags, max_anisotropy,
              mipmap_filter_mode, mipmap_bias, min_lod, max_lod, border0, border1, border2, border3,
              view, view_format, view_width, view_height, view_depth, first_level, last_level,
              first_layer, last_layer)
};
struct TexCreateRep {
  uint64_t object = 0;  // the server's CUtexObject / CUsurfObject
  RGPU_FIELDS(object)
};
struct TexDestroyReq {
  uint32_t device = 0;
  uint32_t surface = 0;
  uint64_t object = 0;
  RGPU_FIELDS(device, surface, object)
};
using TexDestroyRep = Empty;

}  // namespace rgpu::proto
