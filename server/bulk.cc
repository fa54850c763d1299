// Bulk payloads of a session: rows received into device memory and sent back from it.  Where the
// backend's device memory is directly addressable (host backend) bytes go straight between the
// socket and the allocation; otherwise they pass through the session's page-locked staging buffer.
#include <algorithm>
#include <cstring>

#include "server/session.h"

namespace rgpu::server {

using namespace rgpu::proto;
using backend::Rect;
using Status = backend::Status;

namespace {
constexpr size_t kMaxIov = 512;
}

Status Session::receive_rows(uint32_t dev, uint64_t dst, uint64_t dpitch, uint64_t width,
                             uint64_t height) {
  if (width == 0 || height == 0) return Status::success();
  const int d = static_cast<int>(dev);
  if (auto* view = static_cast<char*>(exec_.host_view(d, dst))) {
    iovec iov[kMaxIov];
    for (uint64_t row = 0; row < height;) {
      size_t n = 0;
      for (; n < kMaxIov && row < height; ++n, ++row) iov[n] = {view + row * dpitch, width};
      conn_.recv_all(iov, static_cast<int>(n));
      payload_left_ -= n * width;
    }
    return Status::success();
  }
  auto* stage = static_cast<char*>(staging());
  if (!stage) return Status::fail(err::MemoryAllocation, "cannot allocate the staging buffer");
  const uint64_t cap = config_.staging_bytes;
  if (width <= cap) {
    const uint64_t rows_per = cap / width;
    for (uint64_t row = 0; row < height;) {
      uint64_t k = std::min(rows_per, height - row);
      conn_.recv(stage, k * width);
      payload_left_ -= k * width;
      Status s = exec_.copy_to_device(d, dst + row * dpitch, dpitch, stage, width, Rect{width, k});
      if (!s.ok()) return s;
      row += k;
    }
    return Status::success();
  }
  for (uint64_t row = 0; row < height; ++row) {
    for (uint64_t off = 0; off < width;) {
      uint64_t n = std::min(cap, width - off);
      conn_.recv(stage, n);
      payload_left_ -= n;
      Status s = exec_.copy_to_device(d, dst + row * dpitch + off, n, stage, n, Rect{n, 1});
      if (!s.ok()) return s;
      off += n;
    }
  }
  return Status::success();
}

Status Session::send_rows(uint32_t dev, uint64_t src, uint64_t spitch, uint64_t width,
                          uint64_t height) {
  const int d = static_cast<int>(dev);
  const uint64_t total = width * height;
  auto* stage = static_cast<char*>(exec_.host_view(d, src) ? nullptr : staging());
  auto* view = static_cast<char*>(exec_.host_view(d, src));
  if (total && !view && !stage)
    return Status::fail(err::MemoryAllocation, "cannot allocate the staging buffer");
  if (launched_) {
    // Like CUDA's synchronous copy, wait for earlier kernels first; what they printed is then
    // complete and goes to the client before the data.
    if (Status s = exec_.synchronize(d); !s.ok()) return s;
    forward_output();
  }

  // The reply goes out before the data; a failure part-way is told by the trailing status.
  std::vector<uint8_t> body = encode_ok_reply(Empty{});
  FrameHeader h{current_.type, static_cast<uint16_t>(kFlagReply | (total ? kFlagTrailer : 0)),
                static_cast<uint32_t>(body.size()), current_.request_id, total};
  uint8_t raw[kHeaderSize];
  encode_header(h, raw);
  iovec head[2] = {{raw, sizeof raw}, {body.data(), body.size()}};
  conn_.send_all(head, 2);
  reply_sent_ = true;
  if (!total) return Status::success();

  Status status;
  uint64_t sent = 0;
  if (view) {
    iovec iov[kMaxIov];
    for (uint64_t row = 0; row < height;) {
      size_t n = 0;
      for (; n < kMaxIov && row < height; ++n, ++row) iov[n] = {view + row * spitch, width};
      conn_.send_all(iov, static_cast<int>(n));
      sent += n * width;
    }
  } else {
    const uint64_t cap = config_.staging_bytes;
    for (uint64_t row = 0; row < height && status.ok(); ++row) {
      // Whole rows per chunk when they fit, else pieces of one row.
      uint64_t rows = width <= cap ? std::min(cap / width, height - row) : 1;
      if (rows > 1 || width <= cap) {
        status = exec_.copy_to_host(d, stage, width, src + row * spitch, spitch, Rect{width, rows});
        if (!status.ok()) break;
        conn_.send(stage, rows * width);
        sent += rows * width;
        row += rows - 1;
        continue;
      }
      for (uint64_t off = 0; off < width;) {
        uint64_t n = std::min(cap, width - off);
        status = exec_.copy_to_host(d, stage, n, src + row * spitch + off, n, Rect{n, 1});
        if (!status.ok()) break;
        conn_.send(stage, n);
        sent += n;
        off += n;
      }
    }
  }
  // Pad what could not be read, then the trailing status.
  static const char zeros[64 << 10] = {};
  while (sent < total) {
    size_t n = std::min<uint64_t>(total - sent, sizeof zeros);
    conn_.send(zeros, n);
    sent += n;
  }
  std::vector<uint8_t> trailer;
  Writer(trailer).put<int32_t>(status.code);
  conn_.send(trailer.data(), trailer.size());
  return status;
}

}  // namespace rgpu::server
