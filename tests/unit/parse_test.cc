// Parsing of sizes, addresses and RGPU_SERVERS.
#include <gtest/gtest.h>

#include "client/config.h"
#include "common/cuda_errors.h"
#include "common/strings.h"

using namespace rgpu;

TEST(Parse, Sizes) {
  EXPECT_EQ(parse_size("4096"), 4096u);
  EXPECT_EQ(parse_size("64K"), 64u << 10);
  EXPECT_EQ(parse_size("256MiB"), 256ull << 20);
  EXPECT_EQ(parse_size("8GiB"), 8ull << 30);
  EXPECT_FALSE(parse_size("").has_value());
  EXPECT_FALSE(parse_size("12parsecs").has_value());
  EXPECT_FALSE(parse_size("99999999999T").has_value());
}

TEST(Parse, HostPort) {
  auto a = parse_host_port("gpu1:9000");
  ASSERT_TRUE(a);
  EXPECT_EQ(a->host, "gpu1");
  EXPECT_EQ(a->port, 9000);
  auto b = parse_host_port("gpu2");
  ASSERT_TRUE(b);
  EXPECT_EQ(b->port, kDefaultPort);
  auto c = parse_host_port("[::1]:7000");
  ASSERT_TRUE(c);
  EXPECT_EQ(c->host, "::1");
  EXPECT_EQ(c->port, 7000);
  EXPECT_FALSE(parse_host_port(":80"));
  EXPECT_FALSE(parse_host_port("h:99999"));
  EXPECT_FALSE(parse_host_port("h:8x"));
}

TEST(Parse, Servers) {
  std::vector<std::string> errors;
  auto d = client::parse_servers("gpu1:7766, gpu2/1 ,10.0.0.5:9000/3,,", errors);
  EXPECT_TRUE(errors.empty());
  ASSERT_EQ(d.size(), 3u);
  EXPECT_EQ(d[0].host, "gpu1");
  EXPECT_EQ(d[0].gpu, 0u);
  EXPECT_EQ(d[1].host, "gpu2");
  EXPECT_EQ(d[1].port, kDefaultPort);
  EXPECT_EQ(d[1].gpu, 1u);
  EXPECT_EQ(d[2].port, 9000);
  EXPECT_EQ(d[2].gpu, 3u);
  auto bad = client::parse_servers("gpu1/x,:1,ok", errors);
  EXPECT_EQ(bad.size(), 1u);
  EXPECT_EQ(errors.size(), 2u);
}

TEST(Errors, NamesAndStickiness) {
  EXPECT_STREQ(cuda_error_name(1), "cudaErrorInvalidValue");
  EXPECT_STREQ(cuda_error_string(2), "out of memory");
  EXPECT_STREQ(cuda_error_name(801), "cudaErrorNotSupported");
  EXPECT_EQ(cuda_error_name(123456), nullptr);
  EXPECT_TRUE(cuda_error_is_sticky(700));
  EXPECT_FALSE(cuda_error_is_sticky(2));
}
