// NVML answers on the server (issue 13 item 2): the nvml group's requests (NvmlSystem,
// NvmlDevice) from a backend::GpuQuery, for a full Session and for a query link — a connection
// whose Hello said LinkPurpose::Queries (rgpu's libnvidia-ml.so.1, `rgpu ls`).  A query link gets
// no executor: no CUDA context, no host ledger slot, no page-locked pool; its session process
// serves it with serve_query_link and ends with the connection.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "backend/gpu_query.h"
#include "proto/messages.h"
#include "transport/connection.h"

namespace rgpu::server {

// The answers to the nvml group's requests (shared by Session and query links).
backend::Status answer_nvml_system(backend::GpuQuery& q, proto::NvmlSystemRep& rep);
backend::Status answer_nvml_device(backend::GpuQuery& q, const proto::NvmlDeviceReq& req,
                                   proto::NvmlDeviceRep& rep);

// Serves a query link until the client leaves: NvmlSystem, NvmlDevice and Ping; any other
// request is refused with cudaErrorNotSupported and a message saying the link is for queries.
// `client_known`: the ids the client's Hello listed.  As in a Session, the wait for a request has
// no limit, but a frame that has begun must arrive, and a reply must go out, within
// `client_timeout_s` (rgpud --client-timeout).  Never throws; logs why a link ended badly.
void serve_query_link(transport::Connection& conn, backend::GpuQuery& query,
                      const std::vector<uint16_t>& client_known, const std::string& server_info,
                      int client_timeout_s);

}  // namespace rgpu::server
