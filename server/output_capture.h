// What kernels print (device printf, and host kernels' printf on the host backend) goes to the
// session process's stdout.  OutputCapture points stdout at an in-memory file; at each
// synchronizing request the session takes what accumulated and sends it to the client, which
// writes it to its own stdout before the call returns.  Writes never block (unlike a pipe).
#pragma once

#include <string>

namespace rgpu::server {

class OutputCapture {
 public:
  // Redirects this process's stdout; false (and no redirection) when it cannot.
  bool start();
  // Everything written to stdout since the last take().
  std::string take();

 private:
  int fd_ = -1;
};

}  // namespace rgpu::server
