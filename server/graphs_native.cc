// Executable graphs run as native graphs of the backend (issue 11: one cudaGraphLaunch is one
// message, and on the server one launch).  An executable graph whose enabled nodes are all kernel
// launches (with attributes too, except those recording events), memsets, copies on the device or
// empty nodes is, from its second launch on, captured
// once: its nodes replayed through their handlers (every check applies) onto a private stream the
// backend captures, then instantiated.  Later launches run that in one backend call; a change to
// the executable graph (parameters, enabling, update, child graphs) drops it.  Graphs with other
// nodes (host callbacks, event records and waits, copies of the client's bytes, memory nodes,
// copies between GPUs) are replayed node by node (server/graphs.cc).
#include <cstring>

#include "common/log.h"
#include "server/session.h"

namespace rgpu::server {

using namespace rgpu::proto;
using Status = backend::Status;

namespace {

// The session's id of the private stream a capture runs on (client ids never reach it).
constexpr uint64_t kCaptureStream = ~0ull - 1;

}  // namespace

bool native_node(const GraphNode& n) {
  if (n.disabled) return true;  // not captured
  switch (static_cast<MsgId>(n.type)) {
    case MsgId::LaunchEx: {  // unless an attribute records an event (a node of its own)
      auto q = decode_message<LaunchExReq>(n.body.data(), n.body.size());
      for (const LaunchAttr& a : q.attrs)
        if (event_attribute(a.id)) return false;
      return true;
    }
    case MsgId::MemsetPattern: {  // unless its element's bytes differ (a copy of host bytes)
      auto q = decode_message<MemsetPatternReq>(n.body.data(), n.body.size());
      uint8_t b[4];
      std::memcpy(b, &q.value, 4);
      for (uint32_t i = 1; i < q.elem && i < 4; ++i)
        if (b[i] != b[0]) return false;
      return true;
    }
    case MsgId::Launch:
    case MsgId::Memset:
    case MsgId::MemcpyDtoD:
    case MsgId::Memcpy2DDtoD:
      return true;
    default:
      return n.type == 0;  // an empty node
  }
}

void Session::drop_native(GraphExec& x) {
  if (x.native) exec_.native_destroy(static_cast<int>(x.device), x.native);
  x.native = 0;
  x.native_refused = false;
  x.launches = 0;
}

bool Session::launch_native(GraphExec& x, uint32_t dev, uint64_t stream) {
  if (x.native_refused) return false;
  if (!x.native) {
    if (x.launches++ == 0) return false;  // launched once: replayed, no capture paid for
    for (const GraphNode& n : x.order)
      if (!native_node(n)) {
        x.native_refused = true;
        return false;
      }
    if (!capture_native(x, dev)) {
      x.native_refused = true;
      return false;
    }
  }
  if (Status s = exec_.native_launch(static_cast<int>(dev), x.native, stream); !s.ok()) {
    LOG_WARN("a native graph launch failed (%s); the graph is replayed node by node from now on",
             s.message.c_str());
    drop_native(x);
    x.native_refused = true;
    return false;
  }
  launched_ = true;
  return true;
}

bool Session::capture_native(GraphExec& x, uint32_t dev) {
  const int d = static_cast<int>(dev);
  uint64_t h = 0;
  if (!exec_.stream_create(d, 1 /* non-blocking */, 0, h).ok()) return false;
  streams_[kCaptureStream] = Object{dev, h};
  Status s = exec_.capture_begin(d, h);
  if (s.ok()) {
    for (const GraphNode& n : x.order)
      if (!n.disabled && s.ok()) s = replay_node(n, dev, kCaptureStream);
    uint64_t native = 0;
    Status e = exec_.capture_end(d, h, native);  // ends the capture whatever happened
    if (s.ok()) s = e;
    if (s.ok()) {
      x.native = native;
    } else if (native) {
      exec_.native_destroy(d, native);
    }
  }
  streams_.erase(kCaptureStream);
  exec_.stream_destroy(d, h);
  if (s.ok())
    LOG_INFO("an executable graph of %zu nodes runs as a native graph", x.order.size());
  else
    LOG_INFO("graph replayed node by node: capturing it failed (%s)", s.message.c_str());
  return s.ok();
}

}  // namespace rgpu::server
