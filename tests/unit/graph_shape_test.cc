// The client core's API-neutral graph helpers both front-ends use: user objects' reference
// counts across graphs, clones and executable graphs (client/user_objects.h), and the shape
// queries and DOT description of a graph (client/graph_shape.h), on client-side graphs built by
// hand (no server).
#include "client/graph_shape.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>

#include "client/user_objects.h"

using namespace rgpu;
using namespace rgpu::client;

namespace {

int g_destroyed = 0;
void destroy(void* p) { g_destroyed += *static_cast<int*>(p); }

TEST(UserObjects, DestructorRunsWithTheLastReference) {
  g_destroyed = 0;
  int weight = 1;
  UserObject* o = nullptr;
  EXPECT_EQ(user_object_create(&weight, nullptr, 1, &o), err::InvalidValue);
  EXPECT_EQ(user_object_create(&weight, destroy, 0, &o), err::InvalidValue);
  ASSERT_EQ(user_object_create(&weight, destroy, 2, &o), err::Success);
  EXPECT_EQ(user_object_retain(o, 1), err::Success);        // 3
  EXPECT_EQ(user_object_release(o, 4), err::InvalidValue);  // more than held
  EXPECT_EQ(user_object_release(o, 1), err::Success);       // 2
  int graph = 0, clone = 0, exec = 0;                       // owners are just addresses
  EXPECT_EQ(user_object_owner_retain(&graph, o, 1, true), err::Success);  // moved: 2
  EXPECT_EQ(user_object_release(o, 1), err::Success);                     // 1 (the graph's)
  user_objects_copied(&graph, &clone);                                    // 2
  user_objects_copied(&clone, &exec);                                     // 3
  EXPECT_EQ(user_object_owner_release(&graph, o, 2), err::InvalidValue);  // the graph holds 1
  user_objects_dropped(&graph);
  user_objects_dropped(&clone);
  EXPECT_EQ(g_destroyed, 0);
  user_objects_dropped(&exec);
  EXPECT_EQ(g_destroyed, 1);
}

TEST(UserObjects, OwnerReleaseDestroys) {
  g_destroyed = 0;
  int weight = 10, graph = 0;
  UserObject* o = nullptr;
  ASSERT_EQ(user_object_create(&weight, destroy, 1, &o), err::Success);
  EXPECT_EQ(user_object_owner_retain(&graph, o, 2, false), err::Success);  // 3
  EXPECT_EQ(user_object_release(o, 1), err::Success);                      // 2
  EXPECT_EQ(user_object_owner_release(&graph, o, 1), err::Success);        // 1
  EXPECT_EQ(g_destroyed, 0);
  EXPECT_EQ(user_object_owner_release(&graph, o, 1), err::Success);
  EXPECT_EQ(g_destroyed, 10);
}

// a -> b, a -> c, b -> d, c -> d; c removed later.
struct Diamond {
  Graph g;
  GraphNode *a, *b, *c, *d;
  Diamond() {
    for (uint32_t i = 0; i < 4; ++i) {
      g.nodes.push_back(std::make_unique<GraphNode>());
      g.nodes.back()->graph = &g;
      g.nodes.back()->id = i + 1;
      g.nodes.back()->kind = i == 0 ? 5 : 0;  // empty, then kernels
    }
    a = g.nodes[0].get(), b = g.nodes[1].get(), c = g.nodes[2].get(), d = g.nodes[3].get();
    b->deps = {a}, c->deps = {a}, d->deps = {b, c};
  }
};

TEST(GraphShape, NodesRootsEdgesDependents) {
  Diamond x;
  EXPECT_EQ(graph_nodes(&x.g, false).size(), 4u);
  EXPECT_EQ(graph_nodes(&x.g, true), std::vector<GraphNode*>{x.a});
  EXPECT_EQ(graph_edges_of(&x.g).size(), 4u);
  EXPECT_EQ(graph_dependents(x.a), (std::vector<GraphNode*>{x.b, x.c}));
  x.c->removed = true;
  x.d->deps = {x.b};
  EXPECT_EQ(graph_nodes(&x.g, false).size(), 3u);
  EXPECT_EQ(graph_dependents(x.a), std::vector<GraphNode*>{x.b});
  EXPECT_EQ(graph_edges_of(&x.g).size(), 2u);
}

TEST(GraphShape, NodeInClone) {
  Diamond x, y;
  EXPECT_EQ(graph_node_in_clone(x.c, &y.g), nullptr);  // y is not x's clone
  y.g.origin = &x.g;
  EXPECT_EQ(graph_node_in_clone(x.c, &y.g), y.c);
  EXPECT_EQ(graph_node_in_clone(y.c, &x.g), nullptr);
}

TEST(GraphShape, DotDescription) {
  Diamond x;
  x.g.id = 7;
  char path[] = "/tmp/rgpu_dot_XXXXXX";
  int fd = mkstemp(path);
  ASSERT_GE(fd, 0);
  close(fd);
  ASSERT_EQ(graph_dot_print(&x.g, path, false), err::Success);
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  unlink(path);
  const std::string s = text.str();
  EXPECT_EQ(s.rfind("digraph rgpu_graph_7 {", 0), 0u) << s;
  EXPECT_NE(s.find("n1 [label=\"empty 1\"]"), std::string::npos) << s;
  EXPECT_NE(s.find("n4 [label=\"kernel 4\"]"), std::string::npos) << s;
  EXPECT_NE(s.find("n3 -> n4;"), std::string::npos) << s;
  EXPECT_EQ(graph_dot_print(&x.g, "/nonexistent-dir/x.dot", false), errc::OperatingSystem);
}

}  // namespace
