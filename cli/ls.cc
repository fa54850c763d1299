// rgpu ls: each virtual device of RGPU_SERVERS, as its server's NVML answers (the same query
// links and requests as rgpu's libnvidia-ml.so.1: no CUDA context is made on the server).
#include "cli/ls.h"

#include <cstdio>
#include <map>
#include <memory>
#include <string>

#include "client/config.h"
#include "client/server_link.h"
#include "common/cuda_errors.h"
#include "frontend/nvml/nvml_text.h"
#include "proto/messages.h"

namespace rgpu::cli {

namespace {

constexpr double kGiB = 1073741824.0;

std::string known(bool have, const std::string& text) { return have ? text : "n/a"; }

}  // namespace

int ls_main() {
  client::Config cfg = client::load_config();
  if (cfg.devices.empty()) {
    fprintf(stderr, "rgpu: RGPU_SERVERS names no device\n");
    return 1;
  }
  std::map<std::string, std::unique_ptr<client::ServerLink>> links;
  int failed = 0;
  const uint32_t want = proto::kNvmlIdentity | proto::kNvmlMemory | proto::kNvmlUtil |
                        proto::kNvmlTemp | proto::kNvmlPower;
  for (size_t d = 0; d < cfg.devices.size(); ++d) {
    const client::DeviceSpec& spec = cfg.devices[d];
    auto& link = links[spec.host + ":" + std::to_string(spec.port)];
    if (!link)
      link = std::make_unique<client::ServerLink>(spec.host, spec.port, cfg.token, cfg.timeout_s,
                                                  proto::LinkPurpose::Queries);
    proto::NvmlDeviceRep g;
    CudaError e = link->call<proto::NvmlDeviceMsg>(proto::NvmlDeviceReq{spec.gpu, want}, &g);
    if (e != err::Success) {
      printf("%zu  %s  unavailable (%s)\n", d, spec.text.c_str(), cuda_error_name(e));
      ++failed;
      continue;
    }
    char mem[64], util[32], temp[32], power[32];
    snprintf(mem, sizeof mem, "%.1f/%.1f GiB used", g.memory_used / kGiB, g.total_memory / kGiB);
    snprintf(util, sizeof util, "%u%%", g.util_gpu);
    snprintf(temp, sizeof temp, "%u C", g.temperature);
    snprintf(power, sizeof power, "%.1f W", g.power_mw / 1000.0);
    const nvml::PciAddress pci{g.pci_domain, g.pci_bus, g.pci_device, 0};
    const client::ServerHello& h = link->hello();
    printf("%zu  %s  %s  %s  cc %d.%d  %s  util %s  temp %s  power %s  %s (%s)  [%s, %s backend]\n",
           d, g.name.c_str(), nvml::uuid_text(g.uuid).c_str(), nvml::bus_id_text(pci).c_str(),
           g.cc_major, g.cc_minor, known(g.have & proto::kNvmlMemory, std::string(mem)).c_str(),
           known(g.have & proto::kNvmlUtil, util).c_str(),
           known(g.have & proto::kNvmlTemp, temp).c_str(),
           known(g.have & proto::kNvmlPower, power).c_str(), link->address().c_str(),
           h.transport.c_str(), h.info.c_str(), h.backend.c_str());
  }
  return failed ? 1 : 0;
}

}  // namespace rgpu::cli
