// Bulk copies of a session.  Host-to-device payloads arrive (read by the reader thread) in
// the payload pool's buffers (page-locked when one is free) the backend copies from directly;
// device-to-host data is copied into page-locked buffers that the writer thread sends and then
// returns to the pool, so the DMA of one chunk overlaps the sending of the previous one.  Rows are
// packed `width` bytes each on the wire.
#include <algorithm>
#include <cstring>
#include <functional>
#include <memory>

#include "server/session.h"

namespace rgpu::server {

using namespace rgpu::proto;
using backend::Rect;
using Status = backend::Status;

namespace {

// Calls piece(device offset from the start of the rows, host offset in [a, b), rect) for the
// packed byte range [a, b) of `height` rows of `width` bytes, `pitch` apart on the device: whole
// rows as one rectangle, partial rows as single pieces.
Status for_pieces(uint64_t a, uint64_t b, uint64_t width, uint64_t pitch,
                  const std::function<Status(uint64_t, uint64_t, Rect)>& piece) {
  for (uint64_t p = a; p < b;) {
    uint64_t row = p / width, col = p % width;
    Status s;
    if (col == 0 && b - p >= width) {
      uint64_t k = (b - p) / width;
      s = piece(row * pitch, p - a, Rect{width, k});
      p += k * width;
    } else {
      uint64_t len = std::min(width - col, b - p);
      s = piece(row * pitch + col, p - a, Rect{len, 1});
      p += len;
    }
    if (!s.ok()) return s;
  }
  return Status::success();
}

// An asynchronous copy gives its payload buffers back (and the bytes to the client's window) in
// batches of this many, as the stream gets past them.
constexpr size_t kReleaseBatch = 8;

}  // namespace

Status Session::write_rows(uint32_t dev, uint64_t dst, uint64_t dpitch, uint64_t width,
                           uint64_t height, uint64_t stream, bool async) {
  const int d = static_cast<int>(dev);
  if (width == 0 || height == 0) return Status::success();
  if (!async) return write_rows_sync(d, dst, dpitch, width, height);  // on a waiter
  PayloadStream& payload = *current_->payload;
  // A small asynchronous 1-D copy is staged by the backend as it is issued (as CUDA stages
  // pageable memory): its buffers and window bytes go back at once, with no host function.
  const bool staged = async && height == 1 && width <= kStagedPayloadMax;
  // Other asynchronous copies keep their buffers until the stream is past them; then the completion
  // thread gives them back (never the host function itself: see server/host_work.h).
  std::vector<char*> held;
  uint64_t held_bytes = 0;
  auto give_back = [&] {
    if (held.empty()) return;
    const uint64_t credit = std::min(credit_left_, held_bytes);  // what the client's window holds
    credit_left_ -= credit;
    host_work_.on_stream(exec_, d, stream, [this, bufs = std::move(held), credit] {
      for (char* p : bufs) in_pool_.release(p);
      if (credit) payload_done(credit);
    });
    held.clear();
    held_bytes = 0;
  };
  Status status;
  uint64_t a = 0;
  // Each chunk is copied as soon as it has arrived, while the reader receives the next.
  for (Chunk c; payload.next(c);) {
    uint64_t b = a + c.size;
    if (status.ok())
      status = for_pieces(a, b, width, dpitch, [&](uint64_t doff, uint64_t hoff, Rect r) {
        const char* src = c.data + hoff;
        if (staged) return exec_.copy_to_device_staged(d, dst + doff, src, r.width, stream);
        return exec_.copy_to_device_async(d, dst + doff, dpitch, src, width, r, stream);
      });
    if (!staged) {
      held.push_back(c.data);
      held_bytes += c.size;
      if (held.size() == kReleaseBatch) give_back();
    } else {
      payload.release(c);
    }
    a = b;
  }
  if (!staged) give_back();
  if (staged) {
    const uint64_t credit = std::min(credit_left_, a);
    credit_left_ -= credit;
    if (credit) payload_done(credit);
  }
  if (a != width * height && status.ok())
    status = Status::fail(err::InvalidValue, "the client went away in the middle of a copy");
  return status;
}

// A synchronous copy starts after all earlier legacy-stream work (an event the dispatcher records
// now) and ends before its reply; it runs on a waiter, on a private stream, so later work of other
// streams goes on meanwhile.  The reader still receives the payload in order, chunk i+1 while
// chunk i is copied.
Status Session::write_rows_sync(int dev, uint64_t dst, uint64_t dpitch, uint64_t width,
                                uint64_t height) {
  uint64_t mark = 0;
  if (Status s = mark_legacy(dev, mark); !s.ok()) return s;
  std::shared_ptr<PayloadStream> payload = current_->payload;
  defer([this, dev, dst, dpitch, width, height, mark, payload](bool&) {
    Status status = exec_.event_synchronize(dev, mark);
    release_event(dev, mark);
    uint64_t stream = 0;
    if (status.ok()) status = acquire_stream(dev, stream);
    const bool have_stream = status.ok();
    uint64_t a = 0;
    // Every chunk is taken (and given back) even after a failure: the reader goes on.
    for (Chunk c; payload->next(c);) {
      uint64_t b = a + c.size;
      if (status.ok())
        status = for_pieces(a, b, width, dpitch, [&](uint64_t doff, uint64_t hoff, Rect r) {
          return exec_.copy_to_device_async(dev, dst + doff, dpitch, c.data + hoff, width, r,
                                            stream);
        });
      if (status.ok()) status = exec_.stream_synchronize(dev, stream);
      payload->release(c);
      a = b;
    }
    if (have_stream) release_stream(dev, stream);
    if (a != width * height && status.ok())
      status = Status::fail(err::InvalidValue, "the client went away in the middle of a copy");
    return status;
  });
  return Status::success();
}

Status Session::read_rows_reply(uint32_t dev, uint64_t src, uint64_t spitch, uint64_t width,
                                uint64_t height, uint64_t on_stream) {
  const int d = static_cast<int>(dev);
  const uint64_t total = width * height;
  if (!total) return Status::success();  // nothing to wait for: the usual reply
  uint64_t mark = 0;
  if (Status s = mark_stream(d, on_stream, mark); !s.ok()) return s;
  const FrameHeader req = current_->header;
  const bool launched = launched_;
  // A copy of one chunk with the stream already past `mark` runs on the dispatcher (a short DMA,
  // no handoff); others on a waiter.
  const bool small = total <= pool_.buffer_bytes();
  auto ready = [this, d, mark] { return exec_.event_query(d, mark).ok(); };
  const bool now = small && ready();
  // Wait for the stream's earlier work, then copy on a private stream.
  defer(
      [this, d, src, spitch, width, total, mark, req, launched](bool&) {
        Status status = exec_.event_synchronize(d, mark);
        release_event(d, mark);
        if (!status.ok()) return status;
        if (launched) forward_output(req.request_id);  // what kernels printed goes before the data
        uint64_t stream = 0;
        if (status = acquire_stream(d, stream); !status.ok()) return status;
        const uint64_t chunk = pool_.buffer_bytes() / std::max<uint64_t>(width, 1) * width;
        const uint64_t step = chunk ? chunk : pool_.buffer_bytes();  // whole rows when possible
        // The data goes out as AsyncData frames (offsets into the client's destination), each
        // complete in itself, then the reply: no frame has to wait for the GPU while another is
        // half sent.  (A reply carrying the payload had to keep the outbox to itself while later
        // chunks were copied, and a copy engine queue shared with a stream held at a callback's
        // gate could then wait for a RunCallback frame stuck behind it.)
        host_work_.flush();  // data of asynchronous copies that finished goes first
        for (uint64_t a = 0; a < total && status.ok(); a += step) {
          const uint64_t b = std::min(total, a + step);
          char* buf = pool_.acquire_wait();
          if (!buf) {
            status = Status::fail(err::MemoryAllocation, "cannot allocate a staging buffer");
            break;
          }
          status = for_pieces(a, b, width, spitch, [&](uint64_t soff, uint64_t hoff, Rect r) {
            return exec_.copy_to_host_async(d, buf + hoff, width, src + soff, spitch, r, stream);
          });
          if (status.ok()) status = exec_.stream_synchronize(d, stream);
          if (!status.ok()) {
            pool_.release(buf);
            break;
          }
          OutItem item;
          item.head = channel::Channel::encode_head(
              static_cast<uint16_t>(MsgId::AsyncData), 0, req.request_id,
              encode_message(AsyncDataMsg{a, b == total}), b - a);
          item.payload.push_back({buf, b - a});
          item.release = [this, buf] { pool_.release(buf); };
          outbox_.push(std::move(item));
        }
        release_stream(d, stream);
        return status;
      },
      now, small ? std::function<bool()>(ready) : nullptr);
  return Status::success();
}

Status Session::read_rows_async(uint32_t dev, uint64_t src, uint64_t spitch, uint64_t width,
                                uint64_t height, uint64_t stream) {
  const int d = static_cast<int>(dev);
  const uint64_t total = width * height;
  const uint64_t chunk = async_pool_.buffer_bytes() / std::max<uint64_t>(width, 1) * width;
  const uint64_t step = chunk ? chunk : async_pool_.buffer_bytes();
  for (uint64_t a = 0; a < total; a += step) {
    uint64_t b = std::min(total, a + step);
    char* buf = async_pool_.acquire_wait();
    if (!buf) return Status::fail(err::MemoryAllocation, "cannot allocate a staging buffer");
    Status s = for_pieces(a, b, width, spitch, [&](uint64_t soff, uint64_t hoff, Rect r) {
      return exec_.copy_to_host_async(d, buf + hoff, width, src + soff, spitch, r, stream);
    });
    if (!s.ok()) {
      exec_.stream_synchronize(d, stream);
      async_pool_.release(buf);
      return s;
    }
    // Once the stream has done the copy, the completion thread queues the bytes for the client.
    const uint64_t id = current_->header.request_id, offset = a, size = b - a;
    const bool last = b == total;
    host_work_.on_stream(exec_, d, stream, [this, id, offset, size, last, buf] {
      std::vector<uint8_t> body = encode_message(AsyncDataMsg{offset, last});
      FrameHeader h{static_cast<uint16_t>(MsgId::AsyncData), 0, static_cast<uint32_t>(body.size()),
                    id, size};
      OutItem item;
      item.head = channel::Channel::encode_head(h.type, h.flags, h.request_id, body, h.payload_len);
      item.payload.push_back({buf, size});
      item.release = [this, buf] { async_pool_.release(buf); };
      outbox_.push(std::move(item));
    });
  }
  return Status::success();
}

// ---- handlers
// -------------------------------------------------------------------------------------

Status Session::on(MemcpyHtoDMsg, const MemcpyHtoDReq& q, Empty&) {
  if (Status s = check_range(q.device, q.dst, q.size, q.size, 1); !s.ok()) return s;
  return write_rows(q.device, q.dst, q.size, q.size, 1, 0, false);
}

Status Session::on(Memcpy2DHtoDMsg, const Memcpy2DHtoDReq& q, Empty&) {
  if (Status s = check_range(q.device, q.dst, q.dpitch, q.width, q.height); !s.ok()) return s;
  return write_rows(q.device, q.dst, q.dpitch, q.width, q.height, 0, false);
}

Status Session::on(MemcpyHtoDAsyncMsg, const MemcpyHtoDAsyncReq& q, Empty&) {
  if (Status s = check_range(q.device, q.dst, q.dpitch, q.width, q.height); !s.ok()) return s;
  uint64_t stream = 0;
  if (Status s = stream_of(q.device, q.stream, stream); !s.ok()) return s;
  return write_rows(q.device, q.dst, q.dpitch, q.width, q.height, stream, true);
}

Status Session::on(MemcpyDtoHMsg, const MemcpyDtoHReq& q, Empty&) {
  if (Status s = check_range(q.device, q.src, q.size, q.size, 1); !s.ok()) return s;
  return read_rows_reply(q.device, q.src, q.size, q.size, 1);
}

Status Session::on(Memcpy2DDtoHMsg, const Memcpy2DDtoHReq& q, Empty&) {
  if (Status s = check_range(q.device, q.src, q.spitch, q.width, q.height); !s.ok()) return s;
  return read_rows_reply(q.device, q.src, q.spitch, q.width, q.height);
}

Status Session::on(MemcpyDtoHAsyncMsg, const MemcpyDtoHAsyncReq& q, Empty&) {
  if (Status s = check_range(q.device, q.src, q.spitch, q.width, q.height); !s.ok()) return s;
  uint64_t stream = 0;
  if (Status s = stream_of(q.device, q.stream, stream); !s.ok()) return s;
  if (q.width == 0 || q.height == 0) return Status::success();
  return read_rows_async(q.device, q.src, q.spitch, q.width, q.height, stream);
}

// A device-to-host copy on a stream into pageable memory, which CUDA makes synchronous: data and
// reply as for MemcpyDtoH, after the stream's earlier work (one round trip; the asynchronous form
// hands the data over through a host function, and a synchronization follows anyway).
Status Session::on(MemcpyDtoHStreamMsg, const MemcpyDtoHAsyncReq& q, Empty&) {
  if (Status s = check_range(q.device, q.src, q.spitch, q.width, q.height); !s.ok()) return s;
  uint64_t stream = 0;
  if (Status s = stream_of(q.device, q.stream, stream); !s.ok()) return s;
  return read_rows_reply(q.device, q.src, q.spitch, q.width, q.height, stream);
}

Status Session::on(MemcpyPeerMsg, const MemcpyPeerReq& q, Empty&) {
  if (Status s = check_range(q.dst_device, q.dst, q.size, q.size, 1); !s.ok()) return s;
  if (Status s = check_range(q.src_device, q.src, q.size, q.size, 1); !s.ok()) return s;
  if (q.stream_device != q.dst_device && q.stream_device != q.src_device)
    return Status::fail(400, "the stream belongs to neither GPU of the copy");
  uint64_t stream = 0;
  if (Status s = stream_of(q.stream_device, q.stream, stream); !s.ok()) return s;
  if (q.size == 0) return Status::success();
  return exec_.copy_peer(static_cast<int>(q.dst_device), q.dst, static_cast<int>(q.src_device),
                         q.src, q.size, static_cast<int>(q.stream_device), stream);
}

Status Session::on(DeviceCanAccessPeerMsg, const PeerReq& q, DeviceCanAccessPeerRep& rep) {
  if (Status s = check_device(q.device); !s.ok()) return s;
  if (Status s = check_device(q.peer); !s.ok()) return s;
  if (q.device == q.peer) return Status::success();  // can = 0, as CUDA says for the same GPU
  return exec_.can_access_peer(static_cast<int>(q.device), static_cast<int>(q.peer), rep.can);
}

Status Session::on(DeviceEnablePeerMsg, const PeerReq& q, Empty&) {
  if (Status s = check_device(q.device); !s.ok()) return s;
  if (Status s = check_device(q.peer); !s.ok()) return s;
  if (q.device == q.peer) return Status::fail(err::InvalidDevice, "a GPU is not its own peer");
  return exec_.enable_peer_access(static_cast<int>(q.device), static_cast<int>(q.peer));
}

}  // namespace rgpu::server
