// Streams that do not wait for each other on the server: a synchronizing call (stream, event, a
// large synchronous copy in either direction) behind a 3 s kernel does not hold up another
// thread's launches, copies and synchronizations on its own stream (tests/cuda/stream_waits.cu),
// over TCP and shared memory, under a time limit.
#include <gtest/gtest.h>

#include <string>
#include <tuple>

#include "tests/integration/harness.h"

using namespace rgpu::test;

namespace {

class StreamWaits : public ::testing::TestWithParam<std::tuple<const char*, const char*>> {};

TEST_P(StreamWaits, ASyncWaitsForItsOwnStreamOnly) {
  const std::string transport = std::get<0>(GetParam()), mode = std::get<1>(GetParam());
  Daemon d;
  Env env = d.client_env();
  env["RGPU_TRANSPORT"] = transport;
  Result r = run({cuda_program("stream_waits"), mode}, env, 60);
  EXPECT_EQ(r.status, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("stream_waits " + mode + ": passed"), std::string::npos) << r.out << r.err;
  EXPECT_EQ(r.out.find("FAIL"), std::string::npos) << r.out << r.err;
}

INSTANTIATE_TEST_SUITE_P(Modes, StreamWaits,
                         ::testing::Combine(::testing::Values("tcp", "shm"),
                                            ::testing::Values("stream", "event", "d2h", "h2d", "free")),
                         [](const auto& info) {
                           return std::string(std::get<0>(info.param)) + "_" +
                                  std::get<1>(info.param);
                         });

}  // namespace
