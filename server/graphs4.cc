// The graphs4 group's requests (issue 11, item 1 leftovers): a node for stream-ordered
// allocation or free in a capture (the client's graph memory nodes; empty nodes here), and
// memsets of 2- or 4-byte elements or of 2-D boxes (graph memset nodes).
#include <algorithm>
#include <cstring>
#include <memory>
#include <vector>

#include "server/session.h"

namespace rgpu::server {

using namespace rgpu::proto;
using Status = backend::Status;

namespace {
constexpr CudaError kIllegalState = 401;
constexpr CudaError kCaptureInvalidated = 901;
// A memset whose element bytes differ is a copy of the pattern: bounded host memory for it.
constexpr uint64_t kMaxPatternBytes = 256ull << 20;
}  // namespace

Status Session::on(GraphCaptureNodeMsg, const GraphCaptureNodeReq& q, GraphCaptureNodeRep& rep) {
  uint64_t h = 0;
  if (Status s = stream_of(q.device, q.stream, h); !s.ok()) return s;
  auto st = graphs_.streams.find(q.stream);
  if (st == graphs_.streams.end())
    return Status::fail(kIllegalState, "the stream is not capturing");
  auto seq = graphs_.captures.find(st->second.graph);
  if (seq != graphs_.captures.end() && seq->second.invalidated)
    return Status::fail(kCaptureInvalidated,
                        "the stream's capture was invalidated by an earlier error");
  Graph* g = nullptr;
  if (Status s = graph_of(st->second.graph, g); !s.ok()) return s;
  rep.deps = st->second.tail;
  if (Status s = record_node(*g, rep.deps, 0, {}, nullptr, rep.node); !s.ok()) return s;
  st->second.tail = {rep.node};
  return Status::success();
}

Status Session::on(GraphCaptureInvalidateMsg, const GraphCaptureInvalidateReq& q, Empty&) {
  auto st = graphs_.streams.find(q.stream);
  if (st == graphs_.streams.end())
    return Status::fail(kIllegalState, "the stream is not capturing");
  invalidate_capture(st->second.graph);
  return Status::success();
}

Status Session::on(MemsetPatternMsg, const MemsetPatternReq& q, Empty&) {
  if (q.elem != 1 && q.elem != 2 && q.elem != 4)
    return Status::fail(err::InvalidValue, "a memset's element size must be 1, 2 or 4 bytes");
  if (q.width > (UINT64_MAX / 4) || q.ptr % q.elem)
    return Status::fail(err::InvalidValue, "a memset's address is not aligned to its elements");
  const uint64_t row = q.width * q.elem;
  const uint64_t pitch = q.height > 1 ? q.pitch : row;
  if (q.height > 1 && (pitch < row || pitch % q.elem))
    return Status::fail(err::InvalidValue,
                        "a 2-D memset's pitch is smaller than a row or not a multiple of its "
                        "element size");
  if (Status s = check_range(q.device, q.ptr, pitch, row, q.height); !s.ok()) return s;
  uint64_t h = 0;
  if (Status s = stream_of(q.device, q.stream, h); !s.ok()) return s;
  if (row == 0 || q.height == 0) return Status::success();
  const int d = static_cast<int>(q.device);
  uint8_t bytes[4];
  std::memcpy(bytes, &q.value, 4);
  bool uniform = true;
  for (uint32_t i = 1; i < q.elem; ++i) uniform = uniform && bytes[i] == bytes[0];
  if (uniform) {
    if (pitch == row) return exec_.memset(d, q.ptr, bytes[0], row * q.height, h);
    for (uint64_t r = 0; r < q.height; ++r)
      if (Status s = exec_.memset(d, q.ptr + r * pitch, bytes[0], row, h); !s.ok()) return s;
    return Status::success();
  }
  if (row > kMaxPatternBytes / q.height)
    return Status::fail(err::InvalidValue,
                        "rgpu sets at most 256 MiB per memset node whose element bytes differ");
  auto pattern = std::make_shared<std::vector<uint8_t>>(row * q.height);
  for (size_t i = 0; i < pattern->size(); i += q.elem) std::memcpy(&(*pattern)[i], bytes, q.elem);
  Status s = exec_.copy_to_device_async(d, q.ptr, pitch, pattern->data(), row,
                                        backend::Rect{row, q.height}, h);
  // The pattern stays alive until the stream is past the copy.
  if (s.ok()) s = host_work_.on_stream(exec_, d, h, [keep = pattern] {});
  return s;
}

}  // namespace rgpu::server
