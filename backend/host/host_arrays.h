// The host backend's (test double's) CUDA arrays, texture and surface objects.  An array is host
// memory in CUDA's element layout (rows of width * element bytes, slices of height rows); copies
// between arrays and linear memory are real; texture and surface objects keep their descriptors
// so that host kernels can read and write through them (host_kernel_api.h: `resource`).
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <vector>

#include "backend/executor.h"
#include "backend/host/host_kernel_api.h"

namespace rgpu::backend {

class HostArrays {
 public:
  Status create(const Executor::ArraySpec& spec, uint64_t& handle);
  Status level(uint64_t mipmapped, uint32_t level, uint64_t& handle);
  Status destroy(uint64_t handle, bool mipmapped);
  // Checks the copy against both operands and gives the work to run in stream order (it keeps
  // the arrays alive).  Linear operands are trusted to have been checked by the session.
  Status plan_copy(const Executor::ArrayCopy& c, std::function<void()>& work);
  Status query(uint64_t handle, bool mipmapped, uint32_t op, std::vector<uint64_t>& values);
  Status texture_create(bool surface, const Executor::TextureSpec& spec, uint64_t& object);
  Status texture_destroy(bool surface, uint64_t object);
  // rgpu_host_launch::resource (ctx: this).
  static int resource(void* ctx, unsigned long long object, unsigned level,
                      rgpu_host_resource* out);

  // Bytes of one element of `channels` components of CUarray_format `format`; 0 if unknown here.
  static uint32_t element_bytes(uint32_t format, uint32_t channels);

 private:
  struct Array {
    Executor::ArraySpec spec;
    uint64_t w = 1, h = 1, d = 1;  // dimensions, at least 1
    uint32_t element = 0;
    std::vector<uint8_t> bytes;
    std::vector<std::shared_ptr<Array>> levels;  // a mipmapped array's levels
    uint64_t pitch() const { return w * element; }
    uint64_t slice() const { return pitch() * h; }
  };
  struct Object {
    bool surface = false;
    Executor::TextureSpec spec;
    std::shared_ptr<Array> array;  // array and mipmapped array resources
  };
  std::shared_ptr<Array> find(uint64_t handle, bool mipmapped) const;  // under mu_
  std::mutex mu_;
  std::map<uint64_t, std::shared_ptr<Array>> arrays_, mipmapped_;
  std::map<uint64_t, std::shared_ptr<Array>> level_handles_;
  std::map<uint64_t, Object> objects_;
  uint64_t next_ = 1;
};

}  // namespace rgpu::backend
