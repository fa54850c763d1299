#include "backend/cuda/cuda_executor.h"

#include <cstring>
#include <vector>

#include "backend/cuda/cuda_driver.h"

namespace rgpu::backend {
namespace {

constexpr uint32_t kMaxAttr = 200;

class CudaExecutor final : public Executor {
 public:
  CudaExecutor(CudaDriver drv, int count) : drv_(drv), ctx_(count, nullptr), dev_(count, 0) {
    drv_.cuDriverGetVersion(&version_);
    for (int i = 0; i < count; ++i) drv_.cuDeviceGet(&dev_[i], i);
  }
  ~CudaExecutor() override {
    for (size_t i = 0; i < ctx_.size(); ++i)
      if (ctx_[i]) drv_.cuDevicePrimaryCtxRelease_v2(dev_[i]);
  }

  const char* name() const override { return "cuda"; }
  int device_count() const override { return static_cast<int>(ctx_.size()); }
  int driver_version() const override { return version_; }

  Status device_info(int dev, DeviceInfo& out) override {
    char name[256] = {};
    if (Status s = check(drv_.cuDeviceGetName(name, sizeof name - 1, dev_[dev])); !s.ok()) return s;
    out.name = name;
    CUuuid uuid;
    if (Status s = check(drv_.cuDeviceGetUuid_v2(&uuid, dev_[dev])); !s.ok()) return s;
    memcpy(out.uuid, uuid.bytes, 16);
    size_t total = 0;
    if (Status s = check(drv_.cuDeviceTotalMem_v2(&total, dev_[dev])); !s.ok()) return s;
    out.total_mem = total;
    for (uint32_t a = 1; a < kMaxAttr; ++a) {
      int v = 0;
      if (drv_.cuDeviceGetAttribute(&v, static_cast<CUdevice_attribute>(a), dev_[dev]) ==
          CUDA_SUCCESS)
        out.attrs.push_back({a, v});
    }
    return Status::success();
  }

  Status mem_alloc(int dev, uint64_t size, uint64_t& ptr) override {
    if (Status s = use(dev); !s.ok()) return s;
    CUdeviceptr p = 0;
    Status s = check(drv_.cuMemAlloc_v2(&p, size));
    ptr = p;
    return s;
  }
  Status mem_free(int dev, uint64_t ptr) override {
    if (Status s = use(dev); !s.ok()) return s;
    return check(drv_.cuMemFree_v2(ptr));
  }
  Status mem_info(int dev, uint64_t& free, uint64_t& total) override {
    if (Status s = use(dev); !s.ok()) return s;
    size_t f = 0, t = 0;
    Status s = check(drv_.cuMemGetInfo_v2(&f, &t));
    free = f;
    total = t;
    return s;
  }

  Status copy_to_device(int dev, uint64_t dst, uint64_t dpitch, const void* src, uint64_t spitch,
                        Rect r) override {
    if (Status s = use(dev); !s.ok()) return s;
    if (r.height == 1) return check(drv_.cuMemcpyHtoD_v2(dst, src, r.width));
    CUDA_MEMCPY2D c{};
    c.srcMemoryType = CU_MEMORYTYPE_HOST;
    c.srcHost = src;
    c.srcPitch = spitch;
    c.dstMemoryType = CU_MEMORYTYPE_DEVICE;
    c.dstDevice = dst;
    c.dstPitch = dpitch;
    c.WidthInBytes = r.width;
    c.Height = r.height;
    return check(drv_.cuMemcpy2D_v2(&c));
  }
  Status copy_to_host(int dev, void* dst, uint64_t dpitch, uint64_t src, uint64_t spitch,
                      Rect r) override {
    if (Status s = use(dev); !s.ok()) return s;
    if (r.height == 1) return check(drv_.cuMemcpyDtoH_v2(dst, src, r.width));
    CUDA_MEMCPY2D c{};
    c.srcMemoryType = CU_MEMORYTYPE_DEVICE;
    c.srcDevice = src;
    c.srcPitch = spitch;
    c.dstMemoryType = CU_MEMORYTYPE_HOST;
    c.dstHost = dst;
    c.dstPitch = dpitch;
    c.WidthInBytes = r.width;
    c.Height = r.height;
    return check(drv_.cuMemcpy2D_v2(&c));
  }
  Status copy_on_device(int dev, uint64_t dst, uint64_t dpitch, uint64_t src, uint64_t spitch,
                        Rect r) override {
    if (Status s = use(dev); !s.ok()) return s;
    if (r.height == 1) return check(drv_.cuMemcpyDtoD_v2(dst, src, r.width));
    CUDA_MEMCPY2D c{};
    c.srcMemoryType = CU_MEMORYTYPE_DEVICE;
    c.srcDevice = src;
    c.srcPitch = spitch;
    c.dstMemoryType = CU_MEMORYTYPE_DEVICE;
    c.dstDevice = dst;
    c.dstPitch = dpitch;
    c.WidthInBytes = r.width;
    c.Height = r.height;
    return check(drv_.cuMemcpy2D_v2(&c));
  }
  Status memset(int dev, uint64_t ptr, uint8_t value, uint64_t size) override {
    if (Status s = use(dev); !s.ok()) return s;
    return check(drv_.cuMemsetD8_v2(ptr, value, size));
  }
  Status synchronize(int dev) override {
    if (Status s = use(dev); !s.ok()) return s;
    return check(drv_.cuCtxSynchronize());
  }
  Status reset(int dev) override {
    if (!ctx_[dev]) return Status::success();
    drv_.cuDevicePrimaryCtxRelease_v2(dev_[dev]);
    ctx_[dev] = nullptr;
    return check(drv_.cuDevicePrimaryCtxReset_v2(dev_[dev]));
  }

  void* alloc_staging(size_t bytes) override {
    if (!use(0).ok()) return nullptr;
    void* p = nullptr;
    // Portable: usable for copies to every GPU of this session.
    if (drv_.cuMemHostAlloc(&p, bytes, CU_MEMHOSTALLOC_PORTABLE) != CUDA_SUCCESS) return nullptr;
    return p;
  }
  void free_staging(void* p) override {
    if (p) drv_.cuMemFreeHost(p);
  }

 private:
  Status use(int dev) {
    if (!ctx_[dev]) {
      CUcontext c = nullptr;
      if (Status s = check(drv_.cuDevicePrimaryCtxRetain(&c, dev_[dev])); !s.ok()) return s;
      ctx_[dev] = c;
    }
    return check(drv_.cuCtxSetCurrent(ctx_[dev]));
  }
  Status check(CUresult r) const {
    if (r == CUDA_SUCCESS) return Status::success();
    // CUresult and cudaError_t share their numbers for every code these calls return.
    return Status::fail(static_cast<CudaError>(r), drv_.describe(r));
  }

  CudaDriver drv_;
  int version_ = 0;
  std::vector<CUcontext> ctx_;
  std::vector<CUdevice> dev_;
};

}  // namespace

std::unique_ptr<Executor> make_cuda_executor(std::string& error) {
  CudaDriver drv;
  if (!drv.load(error)) return nullptr;
  int count = 0;
  CUresult r = drv.cuDeviceGetCount(&count);
  if (r != CUDA_SUCCESS || count == 0) {
    error = "the NVIDIA driver reports no GPU (" + drv.describe(r) + ")";
    return nullptr;
  }
  return std::make_unique<CudaExecutor>(drv, count);
}

}  // namespace rgpu::backend
