// rgpu: the user's command.
//   rgpu run [--] PROGRAM [ARGS...]   run a CUDA program (built with -cudart shared) on rgpu
//   rgpu ls                           the virtual devices of RGPU_SERVERS, as NVML sees them
//   rgpu ping [-n COUNT]              round-trip time of a synchronous call to each server
//   rgpu bench [...]                  native vs rgpu vs raw link (cli/bench.cc)
#include <limits.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "cli/bench.h"
#include "cli/ls.h"
#include "client/client.h"
#include "common/log.h"
#include "proto/messages.h"

using namespace rgpu;

namespace {

void usage(FILE* out) {
  fprintf(
      out,
      "usage: rgpu run [--] PROGRAM [ARGS...]   run a CUDA program through rgpu\n"
      "       rgpu ls                           list the devices of RGPU_SERVERS\n"
      "       rgpu ping [-n COUNT]              time a synchronous call to each device's server\n"
      "       rgpu bench [--max-size SIZE] [--json FILE] [--plot FILE.png]\n"
      "                                         native vs rgpu vs raw link, in one run\n"
      "       rgpu bench --peer [--max-size SIZE] [--json FILE]\n"
      "                                         copies between two servers' GPUs\n"
      "       rgpu --version\n"
      "Environment: RGPU_SERVERS (default 127.0.0.1:%d), RGPU_TOKEN, RGPU_LOG\n",
      7766);
}

std::string lib_dir() {
  char exe[PATH_MAX] = {};
  ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
  if (n > 0) {
    std::string dir(exe, static_cast<size_t>(n));
    dir = dir.substr(0, dir.rfind('/'));
    for (const char* rel : {"/../lib", "/lib", "/../../lib"}) {
      std::string cand = dir + rel;
      if (access((cand + "/libcudart.so.13").c_str(), R_OK) == 0) return cand;
    }
  }
  return RGPU_LIB_DIR;
}

int cmd_run(int argc, char** argv) {
  int i = 0;
  if (i < argc && !strcmp(argv[i], "--")) ++i;
  if (i >= argc) {
    usage(stderr);
    return 2;
  }
  std::string dir = lib_dir();
  // libcudart.so.13, libcuda.so.1 and libnvidia-ml.so.1 of rgpu are all found there first.
  const char* old = getenv("LD_LIBRARY_PATH");
  std::string path = old && *old ? dir + ":" + old : dir;
  setenv("LD_LIBRARY_PATH", path.c_str(), 1);
  execvp(argv[i], argv + i);
  fprintf(stderr, "rgpu: cannot run %s: %s\n", argv[i], strerror(errno));
  return 127;
}

int cmd_ping(int argc, char** argv) {
  int count = 1000;
  for (int i = 0; i < argc; ++i)
    if (!strcmp(argv[i], "-n") && i + 1 < argc) count = std::max(1, atoi(argv[++i]));
  client::Client& c = client::Client::get();
  int failed = 0;
  for (int d = 0; d < c.device_count(); ++d) {
    CudaError e;
    client::ServerLink* l = c.link(d, &e);
    if (!l) {
      printf("%d  unavailable (%s)\n", d, cuda_error_name(e));
      ++failed;
      continue;
    }
    std::vector<double> us;
    us.reserve(count);
    for (int i = 0; i < count; ++i) {
      auto t0 = std::chrono::steady_clock::now();
      e = l->call<proto::PingMsg>(proto::PingReq{});
      auto t1 = std::chrono::steady_clock::now();
      if (e != err::Success) break;
      us.push_back(std::chrono::duration<double, std::micro>(t1 - t0).count());
    }
    if (us.empty()) {
      printf("%d  ping failed (%s)\n", d, cuda_error_name(e));
      ++failed;
      continue;
    }
    std::sort(us.begin(), us.end());
    printf("%d  %s  %zu calls  median %.1f us  p99 %.1f us  min %.1f us\n", d, l->address().c_str(),
           us.size(), us[us.size() / 2], us[us.size() * 99 / 100], us[0]);
  }
  return failed ? 1 : 0;
}

}  // namespace

int main(int argc, char** argv) {
  log::init("rgpu", log::Level::Notice);
  if (argc < 2) {
    usage(stderr);
    return 2;
  }
  std::string cmd = argv[1];
  if (cmd == "run") return cmd_run(argc - 2, argv + 2);
  if (cmd == "ls") return cli::ls_main();
  if (cmd == "ping") return cmd_ping(argc - 2, argv + 2);
  if (cmd == "bench") {
    std::string lib = lib_dir();
    char exe[PATH_MAX] = {};
    ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    std::string dir = n > 0 ? std::string(exe, static_cast<size_t>(n)) : std::string(".");
    dir = dir.substr(0, dir.rfind('/'));
    return cli::bench_main(argc - 2, argv + 2, lib.c_str(), dir.c_str());
  }
  if (cmd == "--version") {
    printf("rgpu %s (protocol %u)\n", RGPU_VERSION, proto::kProtocolVersion);
    return 0;
  }
  if (cmd == "--help" || cmd == "-h") {
    usage(stdout);
    return 0;
  }
  fprintf(stderr, "rgpu: unknown command %s\n", cmd.c_str());
  usage(stderr);
  return 2;
}
