// Graphs and stream capture through rgpu's libcuda.so.1 alone against rgpud's host backend, over
// TCP and shared memory (tests/cuda/driver_graphs.cpp: graphs built node by node, their queries,
// setters, update, enabling, clones and child graphs, capture into a new and into an existing
// graph, user objects, the DOT description, memory alloc/free nodes and graph memory attributes,
// kernel node attributes).
#include <gtest/gtest.h>

#include <string>

#include "tests/integration/harness.h"

using namespace rgpu::test;

namespace {

class DriverGraphs : public ::testing::TestWithParam<const char*> {};

TEST_P(DriverGraphs, ProgramPasses) {
  Daemon d;
  Env env = d.client_env();
  env["RGPU_TRANSPORT"] = GetParam();
  Result r = run({cuda_program("driver_graphs")}, env, 60);
  EXPECT_EQ(r.status, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("driver_graphs: passed"), std::string::npos) << r.out << r.err;
  EXPECT_EQ(r.out.find("FAIL"), std::string::npos) << r.out << r.err;
  // Every call it makes is implemented: none answered with the "not supported" stub.
  EXPECT_EQ(r.err.find("not supported by rgpu"), std::string::npos) << r.err;
}

INSTANTIATE_TEST_SUITE_P(Transports, DriverGraphs, ::testing::Values("tcp", "shm"));

}  // namespace
