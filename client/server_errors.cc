// note_server_error for a library or program with a client core: the logs API (client/logs.h).
// Alone in its file so that a library without a client core (rgpu's libnvidia-ml.so.1) defines
// its own and does not pull the client core from the static archive.
#include "client/logs.h"
#include "client/server_link.h"

namespace rgpu::client {

void note_server_error(const std::string& message) { Logs::get().add(Logs::Error, message); }

}  // namespace rgpu::client
