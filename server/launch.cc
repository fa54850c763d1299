// Launches with attributes (cudaLaunchKernelExC, cooperative launches) and the cluster and
// shared-memory occupancy queries.  Attributes are checked here (known ids, events that exist on
// the launch's GPU, no more than one of each) and forwarded to the backend (cuLaunchKernelEx).
#include <set>
#include <string>

#include "common/log.h"
#include "server/session.h"

namespace rgpu::server {

using namespace rgpu::proto;
using Status = backend::Status;

namespace {

constexpr uint32_t kLastAttribute = 16;  // CU_LAUNCH_ATTRIBUTE_NVLINK_UTIL_CENTRIC_SCHEDULING
constexpr size_t kMaxAttributes = 32;

}  // namespace

bool event_attribute(uint32_t id) { return id == 7 || id == 12; }

Status Session::launch_attributes(uint32_t dev, const std::vector<LaunchAttr>& in,
                                  std::vector<backend::LaunchAttribute>& out) const {
  if (in.size() > kMaxAttributes)
    return Status::fail(err::InvalidValue,
                        "more than " + std::to_string(kMaxAttributes) + " launch attributes");
  std::set<uint32_t> seen;
  out.clear();
  for (const LaunchAttr& a : in) {
    if (a.id == 0) continue;  // cudaLaunchAttributeIgnore
    if (a.id > kLastAttribute || a.id == 15)
      return Status::fail(err::InvalidValue,
                          "launch attribute " + std::to_string(a.id) + " is unknown");
    if (!seen.insert(a.id).second)
      return Status::fail(err::InvalidValue,
                          "launch attribute " + std::to_string(a.id) + " given twice");
    backend::LaunchAttribute b;
    b.id = a.id;
    b.v[0] = a.v0, b.v[1] = a.v1, b.v[2] = a.v2, b.v[3] = a.v3;
    if (event_attribute(a.id)) {
      if (Status s = event_of(dev, a.v0, b.v[0]); !s.ok())
        return Status::fail(s.code, "launch attribute " + std::to_string(a.id) + ": " + s.message);
    }
    out.push_back(b);
  }
  return Status::success();
}

Status Session::on(LaunchExMsg, const LaunchExReq& q, Empty&) {
  const LaunchReq& l = q.launch;
  LaunchTarget t;
  if (Status s = prepare_launch(l, t); !s.ok()) return s;
  std::vector<backend::LaunchAttribute> attrs;
  if (Status s = launch_attributes(l.device, q.attrs, attrs); !s.ok()) return s;
  launched_ = true;
  return exec_.launch_ex(static_cast<int>(l.device), t.kernel, t.dims, l.args.data(), l.args.size(),
                         *t.layout, t.stream, attrs);
}

Status Session::on(OccupancyClusterMsg, const OccupancyClusterReq& q, OccupancyClusterRep& rep) {
  uint64_t kernel = 0;
  if (Status s = find_kernel(q.func, kernel); !s.ok()) return s;
  if (q.query > 1) return Status::fail(err::InvalidValue, "unknown cluster occupancy query");
  std::vector<backend::LaunchAttribute> attrs;
  if (Status s = launch_attributes(q.func.device, q.attrs, attrs); !s.ok()) return s;
  for (const auto& a : attrs)
    if (event_attribute(a.id))
      return Status::fail(err::InvalidValue, "an occupancy query takes no event attribute");
  backend::LaunchDims dims;
  dims.grid[0] = q.gx, dims.grid[1] = q.gy, dims.grid[2] = q.gz;
  dims.block[0] = q.bx, dims.block[1] = q.by, dims.block[2] = q.bz;
  dims.shared_mem = q.shared_mem;
  return exec_.occupancy_cluster(static_cast<int>(q.func.device), kernel, static_cast<int>(q.query),
                                 dims, attrs, rep.value);
}

Status Session::on(OccupancyDynamicSmemMsg, const OccupancyDynamicSmemReq& q,
                   OccupancyDynamicSmemRep& rep) {
  uint64_t kernel = 0;
  if (Status s = find_kernel(q.func, kernel); !s.ok()) return s;
  return exec_.occupancy_dynamic_smem(static_cast<int>(q.func.device), kernel, q.blocks,
                                      q.block_size, rep.bytes);
}

}  // namespace rgpu::server
