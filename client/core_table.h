// One client core per process.  rgpu's libcuda.so.1 owns it (the one Client); rgpu's
// libcudart.so.13 links the same code but takes the Client from the libcuda.so.1 the process loads,
// through cuGetExportTable with the rgpu-private UUID below.  Code linked into both libraries
// reaches process state only through that Client (docs/architecture.md, "Driver front-end").
#pragma once

#include <cstddef>
#include <cstdint>

namespace rgpu::client {

class Client;

// The Client of this library: defined in client/core_owner.cc (libcuda.so.1, the cli and tests:
// make the one Client) unless the library defines its own (libcudart.so.13: frontend/cudart/
// core_link.cc takes libcuda's).  Called once, by Client::get().
Client* locate_client();

// Bumped whenever the table or the layout of anything reached through it changes; both libraries
// must be built from the same sources (the size of Client is checked too).
inline constexpr uint32_t kCoreTableVersion = 1;

// {7267 7075 2d63 6f72 652d 7461 626c 6501}: "rgpu-core-table\1"
inline constexpr unsigned char kCoreTableUuid[16] = {
    0x72, 0x67, 0x70, 0x75, 0x2d, 0x63, 0x6f, 0x72, 0x65, 0x2d, 0x74, 0x61, 0x62, 0x6c, 0x65, 0x01};

struct CoreTable {
  size_t size;            // sizeof(CoreTable)
  uint32_t version;       // kCoreTableVersion
  uint32_t client_bytes;  // sizeof(Client) in the library that serves the table
  Client* (*client)();    // the one Client (made at the first call)
  // cuInit and cuGetProcAddress_v2 of that library (CUresult-returning, driver types).
  int (*init)(unsigned flags);
  int (*get_proc_address)(const char* symbol, void** pfn, int cuda_version,
                          unsigned long long flags, int* status);
};

// Binds this library's copies of per-library hooks (the log tap of common/log.h) to `c`, the
// process's Client.  The Client's constructor does it for the library that makes it.
void bind_library(Client* c);

}  // namespace rgpu::client
