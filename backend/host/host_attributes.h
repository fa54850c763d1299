// The device attributes the host backend reports (host_attributes.cc).
#pragma once

#include <cstdint>
#include <utility>
#include <vector>

namespace rgpu::backend {

const std::vector<std::pair<uint32_t, int32_t>>& host_device_attributes();

}  // namespace rgpu::backend
