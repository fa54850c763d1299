// Connect deadlines: a connect to a server that never answers gives up in time.  The receive and
// send deadlines of every transport are checked in transport_conformance_test.cc.
#include <gtest/gtest.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <thread>

#include "transport/shm/shm.h"

using namespace rgpu::transport;
using Clock = std::chrono::steady_clock;

namespace {

double since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

TEST(Deadlines, ConnectingToAServerThatNeverAcceptsTheSegmentGivesUp) {
  // Shared memory: the listener takes the connection but never acknowledges the segment.
  std::string name = "rgpu-test-silent-" + std::to_string(getpid());
  auto l = shm_listen(name);
  auto t0 = Clock::now();
  try {
    shm_connect(name, 1);
    ADD_FAILURE() << "connected to a server that never answered";
  } catch (const TransportError& err) {
    EXPECT_NE(std::string(err.what()).find("within 1 s"), std::string::npos) << err.what();
  }
  EXPECT_LT(since(t0), 3.0);
}

}  // namespace
