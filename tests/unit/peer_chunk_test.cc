// The server-to-server pipeline's chunk sizes and their tuning settings (server/peer_pipe.cc).
#include <gtest/gtest.h>

#include "server/peer_pipe.h"

using rgpu::server::peer_bytes_setting;
using rgpu::server::peer_chunk_bytes;

TEST(PeerChunks, DefaultsBySize) {
  // (The test runs without RGPU_PEER_ONESHOT / RGPU_PEER_CHUNK: the defaults.)
  EXPECT_EQ(peer_chunk_bytes(0), 1u);
  EXPECT_EQ(peer_chunk_bytes(4), 4u);
  EXPECT_EQ(peer_chunk_bytes(256u << 10), 256u << 10);      // one shot
  EXPECT_EQ(peer_chunk_bytes((256u << 10) + 1), 1u << 20);  // 1 MiB chunks
  EXPECT_EQ(peer_chunk_bytes(16u << 20), 1u << 20);
  EXPECT_EQ(peer_chunk_bytes((16u << 20) + 1), rgpu::server::kPeerMaxChunk);
}

TEST(PeerChunks, SettingsParseBytesAndSuffixesAndIgnoreNonsense) {
  EXPECT_EQ(peer_bytes_setting("65536", 7), 65536u);
  EXPECT_EQ(peer_bytes_setting("64K", 7), 65536u);
  EXPECT_EQ(peer_bytes_setting("2M", 7), 2u << 20);
  EXPECT_EQ(peer_bytes_setting("64M", 7), 64u << 20);
  EXPECT_EQ(peer_bytes_setting("65M", 7), 7u);  // over the 64 MiB limit
  EXPECT_EQ(peer_bytes_setting("0", 7), 7u);
  EXPECT_EQ(peer_bytes_setting("", 7), 7u);
  EXPECT_EQ(peer_bytes_setting(nullptr, 7), 7u);
  EXPECT_EQ(peer_bytes_setting("lots", 7), 7u);
  EXPECT_EQ(peer_bytes_setting("99999999999999999999999", 7), 7u);
}
