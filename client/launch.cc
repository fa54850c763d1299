// Launches with attributes and the queries around kernels: cluster and shared-memory occupancy,
// parameter layouts, library globals and kernel lists.  A launch with attributes is one
// asynchronous LaunchEx message; events named by attributes travel as the client's event ids.
#include <algorithm>
#include <cstring>

#include "client/client.h"
#include "common/log.h"
#include "fatbin/fatbin.h"

namespace rgpu::client {

using namespace rgpu::proto;

namespace {

constexpr CudaError kInvalidResourceHandle = errc::InvalidResourceHandle;
constexpr CudaError kInvalidSymbol = errc::InvalidSymbol;
constexpr CudaError kInvalidKernelImage = 200;  // cudaErrorInvalidKernelImage
constexpr uint32_t kProgrammaticEvent = 7;
constexpr uint32_t kCompletionEvent = 12;

}  // namespace

// The attributes as the wire carries them; an event must be live and on `dev`.
static CudaError wire_attributes(Client& c, int dev, const std::vector<Client::LaunchAttribute>& in,
                                 std::vector<LaunchAttr>& out, Event* (*find)(Client&, Event*)) {
  out.clear();
  for (const Client::LaunchAttribute& a : in) {
    LaunchAttr w{a.id, a.v[0], a.v[1], a.v[2], a.v[3]};
    if (a.id == kProgrammaticEvent || a.id == kCompletionEvent) {
      Event* e = a.event ? find(c, a.event) : nullptr;
      if (!e) return kInvalidResourceHandle;
      if (e->device != dev) return err::InvalidValue;  // an event of another device
      w.v0 = e->id;
    }
    out.push_back(w);
  }
  return err::Success;
}

CudaError Client::launch_ex(const Function* f, Dim3 grid, Dim3 block, void** args,
                            size_t shared_mem, const Stream& stream,
                            const std::vector<LaunchAttribute>& attrs) {
  ServerLink* l = nullptr;
  LaunchExReq q;
  if (CudaError e = prepare_launch(f, grid, block, args, shared_mem, stream, &l, &q.launch);
      e != err::Success)
    return e;
  if (attrs.empty()) return l->call<LaunchMsg>(q.launch);
  if (CudaError e = wire_attributes(*this, stream.device, attrs, q.attrs,
                                    [](Client& c, Event* ev) { return c.find_event(ev); });
      e != err::Success)
    return e;
  return l->call<LaunchExMsg>(q);
}

CudaError Client::occupancy_cluster(const Function* f, int query, Dim3 grid, Dim3 block,
                                    size_t shared_mem, const std::vector<LaunchAttribute>& attrs,
                                    int* value) {
  if (!value) return err::InvalidValue;
  const KernelInfo* k = nullptr;
  ServerLink* l = nullptr;
  OccupancyClusterReq q;
  const int dev = current_device();
  if (CudaError e = kernel_on(f, dev, &l, &q.func, &k); e != err::Success) return e;
  q.query = static_cast<uint32_t>(query);
  q.gx = grid.x, q.gy = grid.y, q.gz = grid.z;
  q.bx = block.x, q.by = block.y, q.bz = block.z;
  q.shared_mem = static_cast<uint32_t>(shared_mem);
  for (const LaunchAttribute& a : attrs)
    if (a.id == kProgrammaticEvent || a.id == kCompletionEvent) return err::InvalidValue;
  if (CudaError e = wire_attributes(*this, dev, attrs, q.attrs,
                                    [](Client& c, Event* ev) { return c.find_event(ev); });
      e != err::Success)
    return e;
  OccupancyClusterRep rep;
  CudaError e = l->call<OccupancyClusterMsg>(q, &rep);
  if (e == err::Success) *value = rep.value;
  return e;
}

CudaError Client::occupancy_dynamic_smem(const Function* f, int blocks, int block_size,
                                         size_t* bytes) {
  if (!bytes) return err::InvalidValue;
  const KernelInfo* k = nullptr;
  ServerLink* l = nullptr;
  OccupancyDynamicSmemReq q;
  if (CudaError e = kernel_on(f, current_device(), &l, &q.func, &k); e != err::Success) return e;
  q.blocks = blocks;
  q.block_size = block_size;
  OccupancyDynamicSmemRep rep;
  CudaError e = l->call<OccupancyDynamicSmemMsg>(q, &rep);
  if (e == err::Success) *bytes = static_cast<size_t>(rep.bytes);
  return e;
}

CudaError Client::param_info(const Function* f, size_t index, size_t* offset, size_t* size) {
  if (!offset || !size) return err::InvalidValue;
  const KernelInfo* k = nullptr;
  ServerLink* l = nullptr;
  FuncReq fr;
  if (CudaError e = kernel_on(f, current_device(), &l, &fr, &k); e != err::Success) return e;
  if (index >= k->params.size()) return err::InvalidValue;
  *offset = k->params[index].offset;
  *size = k->params[index].size;
  return err::Success;
}

CudaError Client::global_info(const Variable* v, uint64_t* addr, uint64_t* size) {
  GlobalInfo g;
  if (CudaError e = resolved_global(v, current_device(), &g); e != err::Success) return e;
  if (!g.found) return kInvalidSymbol;
  if (addr) *addr = g.addr;
  if (size) *size = g.size;
  return err::Success;
}

CudaError Client::module_kernels(Module* m, std::shared_ptr<const KernelNames>* out) {
  if (!m || !modules_.valid(m)) return kInvalidResourceHandle;
  {
    std::lock_guard<std::mutex> lock(m->mu);
    if (m->kernels) {
      *out = m->kernels;
      return err::Success;
    }
  }
  // Parsed outside the lock (a large image takes a while); two threads may both parse it once.
  auto k = std::make_shared<KernelNames>();
  try {
    fatbin::ModuleInfo info = fatbin::describe_image(m->image, m->size);
    for (const auto& [name, layout] : info.kernels) {
      k->ordered.push_back(name);
      k->set.insert(name);
    }
  } catch (const fatbin::FatbinError& e) {
    LOG_WARN("cannot list the kernels of a library: %s", e.what());
    return kInvalidKernelImage;
  }
  std::lock_guard<std::mutex> lock(m->mu);
  if (!m->kernels) m->kernels = std::move(k);
  *out = m->kernels;
  return err::Success;
}

CudaError Client::module_kernel_names(Module* m, std::vector<std::string>& names) {
  std::shared_ptr<const KernelNames> k;
  if (CudaError e = module_kernels(m, &k); e != err::Success) return e;
  names = k->ordered;
  return err::Success;
}

}  // namespace rgpu::client
