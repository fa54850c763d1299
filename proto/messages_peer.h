// Messages of server-to-server copies (issue 14): a copy between GPUs of two servers goes from
// server to server directly.  The client asks the passive server (the one whose GPU is not the
// stream's) for a one-time ticket to a range of its memory, then asks the active server to copy
// on its stream; the active server links to the passive one (HelloReq::purpose PeerLink), shows
// the ticket (PeerAttach) and reads or writes the range (PeerRead / PeerWrite + PeerFinish).
// Included from proto/messages.h; ids 0x1100-0x11FF (proto/catalogue.def).  docs/architecture.md,
// "Server-to-server copies".
#pragma once

#include <array>
#include <cstdint>
#include <string>

#include "proto/wire.h"

namespace rgpu::proto {

using PeerTicketId = std::array<uint8_t, 16>;
using PeerSecret = std::array<uint8_t, 32>;

// Client -> passive server: a ticket for `height` rows of `width` bytes, `pitch` apart, from
// `ptr` on GPU `device`; `write`: the peer will write it (else read it).  The range must lie in
// one allocation of this session.
struct PeerTicketReq {
  uint32_t device = 0;
  uint64_t ptr = 0;
  uint64_t pitch = 0;
  uint64_t width = 0;
  uint64_t height = 0;
  uint32_t write = 0;
  RGPU_FIELDS(device, ptr, pitch, width, height, write)
};
struct PeerTicketRep {
  PeerTicketId id{};    // routes a peer link to this session (through rgpud)
  PeerSecret secret{};  // shown once by the peer; compared in constant time
  uint32_t expires_ms = 0;
  RGPU_FIELDS(id, secret, expires_ms)
};

// Client -> active server (asynchronous, ordered on `stream` of GPU `device`): copy between the
// local rows (`local`, `local_pitch`) and the ticketed remote rows (`remote`, `remote_pitch`),
// `height` rows of `width` bytes.  `push`: local is the source.  `endpoint`: "host:port" of the
// passive rgpud as the client reaches it; `remote_name`: how errors name that server.
struct PeerCopyReq {
  uint32_t device = 0;
  uint64_t local = 0;
  uint64_t local_pitch = 0;
  uint64_t remote = 0;
  uint64_t remote_pitch = 0;
  uint64_t width = 0;
  uint64_t height = 0;
  uint32_t push = 0;
  uint64_t stream = 0;
  std::string endpoint;
  std::string remote_name;
  PeerTicketId ticket{};
  PeerSecret secret{};
  RGPU_FIELDS(device, local, local_pitch, remote, remote_pitch, width, height, push, stream,
              endpoint, remote_name, ticket, secret)
};

// Active -> passive server, the first request on a peer link.
struct PeerAttachReq {
  PeerTicketId ticket{};
  PeerSecret secret{};
  RGPU_FIELDS(ticket, secret)
};
// Bytes of the ticketed rows, from `offset` (counted in the packed rows: row r starts at r*width).
struct PeerWriteReq {
  uint64_t offset = 0;
  uint64_t size = 0;
  uint64_t payload_bytes() const { return size; }
  RGPU_FIELDS(offset, size)
};
struct PeerReadReq {
  uint64_t offset = 0;
  uint64_t size = 0;
  RGPU_FIELDS(offset, size)
};
// PeerWrite: `size` bytes follow, to be written at `offset` (asynchronous: errors come back at
// PeerFinish).  PeerRead: the bytes come back as AsyncData frames (offsets relative to the
// request's), then the reply.  PeerFinish: every write has reached the GPU.
using PeerWriteRep = Empty;
using PeerReadRep = Empty;
using PeerFinishReq = Empty;
using PeerFinishRep = Empty;
using PeerAttachRep = Empty;
using PeerCopyRep = Empty;

}  // namespace rgpu::proto
