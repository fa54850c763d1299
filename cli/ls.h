// rgpu ls (cli/ls.cc).
#pragma once

namespace rgpu::cli {

// Prints each device of RGPU_SERVERS as its server's NVML answers; 1 when one is unavailable.
int ls_main();

}  // namespace rgpu::cli
