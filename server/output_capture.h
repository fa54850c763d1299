// What kernels print (device printf, and host kernels' printf on the host backend) goes to the
// session process's stdout, and a failed device assert's message to its stderr.  OutputCapture
// points stdout (or stderr) at an in-memory file; at each synchronizing request the session takes
// what accumulated and sends it to the client, which writes it to its own stdout (stderr) before
// the call returns.  Writes never block (unlike a pipe).  Before capturing stderr, the session
// process points its own log lines at a copy of the original stderr (log::set_output).
#pragma once

#include <string>

namespace rgpu::server {

class OutputCapture {
 public:
  // Redirects this process's stdout (or `target`: STDERR_FILENO); false (and no redirection)
  // when it cannot.
  bool start(int target = 1);
  // Everything written to it since the last take().
  std::string take();

 private:
  int fd_ = -1;
  int target_ = 1;
};

}  // namespace rgpu::server
