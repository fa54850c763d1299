// locate_client() for a library or program that owns the client core (libcuda.so.1, the rgpu
// tool, tests): it makes the one Client.  Alone in its file so that a library defining its own
// locate_client (libcudart.so.13) does not pull this one from the static archive.
#include "client/client.h"
#include "client/core_table.h"

namespace rgpu::client {

Client* locate_client() { return Client::make(true); }

}  // namespace rgpu::client
