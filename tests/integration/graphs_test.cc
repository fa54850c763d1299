// CUDA graphs end to end against rgpud --backend host, over tcp and shm (tests/cuda/graphs.cu):
// capture replayed 100 times, fork/join capture, capture errors, explicit graphs, host nodes in
// order, exec update, clone and child graphs.
#include <gtest/gtest.h>

#include "tests/integration/harness.h"

using namespace rgpu::test;

class Graphs : public ::testing::TestWithParam<const char*> {};

TEST_P(Graphs, CaptureAndExplicitGraphsReplayCorrectly) {
  Daemon d({"--host-capacity", "1GiB"});
  auto env = d.client_env();
  env["RGPU_TRANSPORT"] = GetParam();
  Result r = run({cuda_program("graphs")}, env, 60);
  EXPECT_EQ(r.status, 0) << "stdout:\n" << r.out << "\nstderr:\n" << r.err;
  EXPECT_EQ(r.out.find("FAIL"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("graphs: passed"), std::string::npos) << r.out;
  EXPECT_TRUE(d.alive());
}
INSTANTIATE_TEST_SUITE_P(Transports, Graphs, ::testing::Values("tcp", "shm"));

// Edges, dependent nodes, clones, event/host node parameters, exec flags, DOT output, user
// objects and stream ids (tests/cuda/graphs_query.cu).
class GraphQueries : public ::testing::TestWithParam<const char*> {};

TEST_P(GraphQueries, AnswerFromTheGraphsShape) {
  Daemon d({"--host-capacity", "1GiB"});
  auto env = d.client_env();
  env["RGPU_TRANSPORT"] = GetParam();
  Result r = run({cuda_program("graphs_query")}, env, 60);
  EXPECT_EQ(r.status, 0) << "stdout:\n" << r.out << "\nstderr:\n" << r.err;
  EXPECT_EQ(r.out.find("FAIL"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("graphs_query: passed"), std::string::npos) << r.out;
  EXPECT_TRUE(d.alive());
}
INSTANTIATE_TEST_SUITE_P(Transports, GraphQueries, ::testing::Values("tcp", "shm"));

// Stream attributes, cudaGraphAddNode, node parameter queries, disabled and destroyed nodes,
// child-graph nodes' graphs and their replacement, copy nodes to and from symbols
// (tests/cuda/graphs_more.cu).
class GraphsMore : public ::testing::TestWithParam<const char*> {};

TEST_P(GraphsMore, NodesAttributesAndSymbolsBehaveAsCuda) {
  Daemon d({"--host-capacity", "1GiB"});
  auto env = d.client_env();
  env["RGPU_TRANSPORT"] = GetParam();
  Result r = run({cuda_program("graphs_more")}, env, 60);
  EXPECT_EQ(r.status, 0) << "stdout:\n" << r.out << "\nstderr:\n" << r.err;
  EXPECT_EQ(r.out.find("FAIL"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("graphs_more: passed"), std::string::npos) << r.out;
  EXPECT_TRUE(d.alive());
}
INSTANTIATE_TEST_SUITE_P(Transports, GraphsMore, ::testing::Values("tcp", "shm"));

// Graph memory nodes: explicit and captured allocation and free nodes, allocations outliving
// their launch, auto free on launch, graph memory attributes (tests/cuda/graphs_mem.cu).
class GraphsMem : public ::testing::TestWithParam<const char*> {};

TEST_P(GraphsMem, AllocationsLiveAsCudaSays) {
  Daemon d({"--host-capacity", "1GiB"});
  auto env = d.client_env();
  env["RGPU_TRANSPORT"] = GetParam();
  Result r = run({cuda_program("graphs_mem")}, env, 60);
  EXPECT_EQ(r.status, 0) << "stdout:\n" << r.out << "\nstderr:\n" << r.err;
  EXPECT_EQ(r.out.find("FAIL"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("graphs_mem: passed"), std::string::npos) << r.out;
  EXPECT_TRUE(d.alive());
}
INSTANTIATE_TEST_SUITE_P(Transports, GraphsMem, ::testing::Values("tcp", "shm"));

// Conditional nodes: while, if/else and switch nodes set by kernels, nested, bodies captured
// into, default values at each launch, the driver's form (tests/cuda/graphs_cond.cu).  On the
// host backend the conditional nodes run in its recorded stream work, as on a GPU in the
// driver's graph.
class GraphsCond : public ::testing::TestWithParam<const char*> {};

TEST_P(GraphsCond, ConditionalNodesRunTheirBodiesAsCudaSays) {
  Daemon d({"--host-capacity", "1GiB"});
  auto env = d.client_env();
  env["RGPU_TRANSPORT"] = GetParam();
  Result r = run({cuda_program("graphs_cond")}, env, 60);
  EXPECT_EQ(r.status, 0) << "stdout:\n" << r.out << "\nstderr:\n" << r.err;
  EXPECT_EQ(r.out.find("FAIL"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("graphs_cond: passed"), std::string::npos) << r.out;
  EXPECT_TRUE(d.alive());
}
INSTANTIATE_TEST_SUITE_P(Transports, GraphsCond, ::testing::Values("tcp", "shm"));
