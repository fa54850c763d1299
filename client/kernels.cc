// Kernels on the client: launches are packed by the kernel's parameter layout (resolved at the
// kernel's first use, client/module_loading.cc) and sent without waiting for a reply; attributes
// and occupancy answers are kept per kernel.
#include <cstring>

#include "client/client.h"
#include "common/log.h"

namespace rgpu::client {

using namespace rgpu::proto;

namespace {

constexpr CudaError kInvalidSymbol = errc::InvalidSymbol;
constexpr CudaError kInvalidDeviceFunction = errc::InvalidDeviceFunction;
// What CUDA 13 returns for a function pointer it never registered (seen on an H200, driver 580).
constexpr CudaError kInvalidResourceHandle = errc::InvalidResourceHandle;
constexpr CudaError kSymbolNotFound = errc::NotFound;

}  // namespace

CudaError Client::kernel_on(const Function* f, int dev, ServerLink** l, FuncReq* req,
                            const KernelInfo** k) {
  uint32_t module = 0;
  CudaError e = resolved_kernel(f, dev, &module, k);
  if (e != err::Success) return e;
  if (!(*k)->found) {
    LOG_WARN("kernel %s was not found in its module on the server", f->name.c_str());
    return kInvalidDeviceFunction;
  }
  *l = link(dev, &e);
  *req = FuncReq{devices_[dev].spec.gpu, module, (*k)->slot};
  return e;
}

CudaError Client::launch(const Function* f, Dim3 grid, Dim3 block, void** args, size_t shared_mem,
                         const Stream& stream) {
  ServerLink* l = nullptr;
  LaunchReq q;
  if (CudaError e = prepare_launch(f, grid, block, args, shared_mem, stream, &l, &q);
      e != err::Success)
    return e;
  return l->call<LaunchMsg>(q);
}

CudaError Client::prepare_launch(const Function* f, Dim3 grid, Dim3 block, void** args,
                                 size_t shared_mem, const Stream& stream, ServerLink** link,
                                 LaunchReq* req) {
  const int dev = stream.device;
  const KernelInfo* ki = nullptr;
  ServerLink*& l = *link;
  FuncReq fr;
  if (CudaError e = kernel_on(f, dev, &l, &fr, &ki); e != err::Success) return e;
  // Configurations the driver would refuse at launch time are refused here, synchronously and
  // with the driver's code (cudaErrorInvalidValue), as CUDA does; everything else is reported at
  // the next synchronizing call.
  const DeviceInfo* info = nullptr;
  if (CudaError e = device_info(dev, &info); e != err::Success) return e;
  const uint64_t threads = uint64_t(block.x) * block.y * block.z;
  if (!grid.x || !grid.y || !grid.z || !threads || threads > uint64_t(info->attr(1, 1024)) ||
      block.x > uint32_t(info->attr(2, 1024)) || block.y > uint32_t(info->attr(3, 1024)) ||
      block.z > uint32_t(info->attr(4, 64)) || grid.y > uint32_t(info->attr(6, 65535)) ||
      grid.z > uint32_t(info->attr(7, 65535)) || grid.x > uint32_t(info->attr(5, 2147483647)))
    return err::InvalidValue;

  LaunchReq& q = *req;
  q.device = fr.device;
  q.module = fr.module;
  q.kernel = fr.kernel;
  q.gx = grid.x, q.gy = grid.y, q.gz = grid.z;
  q.bx = block.x, q.by = block.y, q.bz = block.z;
  q.shared_mem = static_cast<uint32_t>(shared_mem);
  q.stream = stream.id;
  const KernelInfo& k = *ki;
  q.args.assign(k.arg_bytes, 0);
  for (size_t i = 0; i < k.params.size(); ++i) {
    if (!args || !args[i]) return err::InvalidValue;
    std::memcpy(q.args.data() + k.params[i].offset, args[i], k.params[i].size);
  }
  if (CudaError e = unreachable_host_argument(f, k, q.args); e != err::Success) return e;
  return managed_before_work(dev, stream.id);  // the kernel may touch managed memory
}

// Natively every page-locked allocation is device-accessible under unified addressing, mapped
// flag or not.  Here it is only where the session maps it for its GPU (over shm) or where managed
// memory stands in (cudaHostAllocMapped over TCP); ordinary page-locked memory of this process
// is out of a remote GPU's reach, and a kernel dereferencing it would fault with an illegal
// address and take the context with it.  A pointer parameter naming such memory is refused
// before anything is sent, with the call, the kernel and the ways around it.  Only parameters of
// pointer size are looked at (a struct that carries a host pointer it never dereferences is not
// refused); nothing is looked up while no such memory exists.
CudaError Client::unreachable_host_argument(const Function* f, const KernelInfo& k,
                                            const std::vector<uint8_t>& args) {
  if (!map_.has_unmapped_host()) return err::Success;
  for (const ParamLayout& p : k.params) {
    if (p.size != sizeof(uint64_t) || p.offset + sizeof(uint64_t) > args.size()) continue;
    uint64_t v = 0;
    std::memcpy(&v, args.data() + p.offset, sizeof v);
    if (v == 0) continue;
    std::optional<HostRange> r = map_.find_host(v);
    if (!r || r->mapped) continue;
    if (first_time("unreachable host argument " + f->name))
      LOG_ERROR(
          "kernel launch of %s: parameter at offset %u points into page-locked host memory "
          "(%s at 0x%llx, %llu bytes) that this process's GPU cannot reach: it is %s; allocate "
          "it with cudaHostAllocMapped / cuMemHostAlloc(CU_MEMHOSTALLOC_DEVICEMAP) (managed "
          "memory stands in over TCP), or use a server on this machine (RGPU_TRANSPORT=shm). "
          "JAX/XLA: its autotuner (redzone checker) does this; XLA_FLAGS=--xla_gpu_autotune_level=0 avoids "
          "it (docs/compatibility.md, \"Mapped page-locked memory\")",
          f->name.c_str(), p.offset, r->registered ? "cudaHostRegister" : "cudaHostAlloc",
          static_cast<unsigned long long>(r->base), static_cast<unsigned long long>(r->size),
          r->registered ? "registered without cudaHostRegisterMapped"
                        : "not shared with the GPU's server");
    return err::NotSupported;
  }
  return err::Success;
}

CudaError Client::func_attributes(const Function* f, std::vector<int32_t>& values) {
  const KernelInfo* ki = nullptr;
  ServerLink* l = nullptr;
  FuncReq fr;
  if (CudaError e = kernel_on(f, current_device(), &l, &fr, &ki); e != err::Success) return e;
  const KernelInfo& k = *ki;
  {
    std::lock_guard<std::mutex> lock(func_cache_mu_);
    if (!k.attrs.empty()) {
      values = k.attrs;
      return err::Success;
    }
  }
  FuncGetAttributesRep rep;
  CudaError e = l->call<FuncGetAttributesMsg>(fr, &rep);
  if (e == err::Success && !rep.values.empty()) {
    std::lock_guard<std::mutex> lock(func_cache_mu_);
    k.attrs = rep.values;
  }
  values = std::move(rep.values);
  return e;
}

CudaError Client::func_set_attribute(const Function* f, int attr, int value) {
  return func_set_attribute_on(f, current_device(), attr, value);
}

CudaError Client::func_set_attribute_on(const Function* f, int dev, int attr, int value) {
  if (CudaError e = check_device(dev); e != err::Success) return e;
  const KernelInfo* ki = nullptr;
  ServerLink* l = nullptr;
  FuncReq fr;
  if (CudaError e = kernel_on(f, dev, &l, &fr, &ki); e != err::Success) return e;
  const KernelInfo& k = *ki;
  {
    // Setting what the function already has changes nothing: no round trip.
    std::lock_guard<std::mutex> lock(func_cache_mu_);
    if (attr >= 0 && static_cast<size_t>(attr) < k.attrs.size() && k.attrs[attr] == value)
      return err::Success;
  }
  CudaError e = l->call<FuncSetAttributeMsg>(FuncSetAttributeReq{fr, attr, value});
  std::lock_guard<std::mutex> lock(func_cache_mu_);
  k.attrs.clear();
  k.occupancy.clear();
  return e;
}

CudaError Client::func_set_cache_config(const Function* f, int config) {
  const KernelInfo* ki = nullptr;
  ServerLink* l = nullptr;
  FuncReq fr;
  if (CudaError e = kernel_on(f, current_device(), &l, &fr, &ki); e != err::Success) return e;
  CudaError e = l->call<FuncSetCacheConfigMsg>(FuncSetCacheConfigReq{fr, config});
  std::lock_guard<std::mutex> lock(func_cache_mu_);
  ki->occupancy.clear();
  return e;
}

CudaError Client::occupancy(const Function* f, int block_size, size_t dynamic_smem, unsigned flags,
                            int* blocks) {
  const KernelInfo* ki = nullptr;
  ServerLink* l = nullptr;
  FuncReq fr;
  if (CudaError e = kernel_on(f, current_device(), &l, &fr, &ki); e != err::Success) return e;
  const KernelInfo& k = *ki;
  const auto key = std::make_tuple(int32_t(block_size), uint64_t(dynamic_smem), uint32_t(flags));
  {
    std::lock_guard<std::mutex> lock(func_cache_mu_);
    if (auto it = k.occupancy.find(key); it != k.occupancy.end()) {
      *blocks = it->second;
      return err::Success;
    }
  }
  OccupancyRep rep;
  CudaError e = l->call<OccupancyMsg>(OccupancyReq{fr, block_size, dynamic_smem, flags}, &rep);
  if (e == err::Success) {
    *blocks = rep.blocks;
    std::lock_guard<std::mutex> lock(func_cache_mu_);
    if (k.occupancy.size() < 4096) k.occupancy[key] = rep.blocks;
  }
  return e;
}

CudaError Client::symbol_address(const Variable* v, uint64_t* addr) {
  GlobalInfo g;
  if (CudaError e = resolved_global(v, current_device(), &g); e != err::Success) return e;
  if (!g.found) return kInvalidSymbol;
  *addr = g.addr;
  return err::Success;
}

}  // namespace rgpu::client
