// Messages of server-to-server copies (issue 14): a copy between GPUs of two servers goes from
// server to server directly.  The first copy between two servers asks the passive server (the
// one whose GPU is not the stream's) for a one-time ticket and hands it to the active server,
// which links to the passive one (HelloReq::purpose PeerLink) and shows it (PeerAttach; both ends
// prove they hold the peer key and the ticket's secret: PeerProve).  The
// link then stays up for the client's later copies between the two (each preceded by a
// PeerFence from the client to the passive server, for order): each names its rows
// (PeerBegin, checked against the passive session's allocations) and writes them (PeerWrite... +
// PeerFinish) or reads them (PeerRead).  Included from proto/messages.h; ids 0x1100-0x11FF
// (proto/catalogue.def).  docs/architecture.md, "Server-to-server copies".
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "proto/wire.h"

namespace rgpu::proto {

using PeerTicketId = std::array<uint8_t, 16>;
using PeerSecret = std::array<uint8_t, 32>;

// A ticket as the passive rgpud states it (PeerTicket's reply): the client hands it to the active
// rgpud unchanged (PeerCopy).  `mac` covers every other field under the peer key, a secret the
// rgpuds of one cluster share and clients never hold (proto/peer_auth.h): the active rgpud
// connects to `endpoint` only when the MAC holds, so a client cannot make it connect anywhere
// else.  All zero `id`: no ticket.
struct PeerVoucher {
  PeerTicketId id{};    // routes a peer link to the issuing session (through rgpud)
  PeerSecret secret{};  // never crosses a peer link: both ends prove they hold it
  // The SHA-256 of the passive rgpud's TLS certificate when it runs with --tls-cert (all zero when
  // not): the link must then be TLS, and the active server accepts exactly this certificate.
  std::array<uint8_t, 32> tls_pin{};
  // Where the passive rgpud is: the numeric address and port its client reached it at (its
  // connection's local address; the TCP listener's, as loopback, for a client on shared memory).
  std::string endpoint;
  std::string machine;        // its machine (boot id and network namespace): for loopback
  uint64_t not_after_ms = 0;  // wall clock (ms since 1970) after which the ticket is void
  std::array<uint8_t, 32> mac{};
  RGPU_FIELDS(id, secret, tls_pin, endpoint, machine, not_after_ms, mac)
};

// Client -> passive server: a ticket that lets one peer link attach to this session (the link
// may then read and write the session's device memory, range by range, for the client).
using PeerTicketReq = Empty;
struct PeerTicketRep {
  PeerVoucher ticket;
  uint32_t expires_ms = 0;
  RGPU_FIELDS(ticket, expires_ms)
};

// Client -> active server (asynchronous, ordered on `stream` of GPU `device`): copy between the
// local rows (`local`, `local_pitch`) and the remote rows (`remote`, `remote_pitch` on the passive
// server's GPU `remote_device`), `height` rows of `width` bytes.  `push`: local is the source.
// `endpoint`: the passive rgpud as the client names it (its RGPU_SERVERS entry): it keys the
// session's link and nothing is connected to it; `remote_name`: how errors name that server.
// `ticket`: a fresh ticket, to (re)link (the link goes to its endpoint); all zero id: use the
// link an earlier copy made.
struct PeerCopyReq {
  uint32_t device = 0;
  uint32_t remote_device = 0;
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
  PeerVoucher ticket;
  uint64_t fence = 0;  // the PeerFence the client sent the passive server for this copy
  RGPU_FIELDS(device, remote_device, local, local_pitch, remote, remote_pitch, width, height, push,
              stream, endpoint, remote_name, ticket, fence)
};

// Client -> passive server (asynchronous), before each copy's PeerCopy: marks the end of the
// client's work so far on GPU `device`'s legacy stream (an event the session records).  The
// copy's PeerBegin names `fence`, and the passive end waits for that work before it touches its
// rows, as a cudaMemcpy the client issued there earlier (maybe eagerly, without a reply) must
// have landed.  Ids are the client's, unique in its session.
struct PeerFenceReq {
  uint32_t device = 0;
  uint64_t fence = 0;
  RGPU_FIELDS(device, fence)
};

// Active -> passive server over TCP, in plain, when the passive rgpud runs TLS: the first frame
// (instead of a Hello), naming only the ticket's id, so the connection can be routed to the
// session that issued it before TLS begins (TLS state cannot move between processes; the session
// runs the TLS handshake itself).  Answered in plain; then TLS, then PeerAttach with the secret.
struct PeerRouteReq {
  PeerTicketId ticket{};
  RGPU_FIELDS(ticket)
};
using PeerRouteRep = Empty;

// Active -> passive server, the first request on a peer link (after Hello, which asks no token
// of a peer link; over TLS, after PeerRoute and the TLS handshake): the ticket's id and a fresh
// nonce of the active side.  The reply: a fresh nonce of the passive side and its proof
// (proto/peer_auth.h: a MAC under the peer key and the ticket's secret over both nonces, as the
// passive end); the active side checks it before it sends anything else.  Then PeerProve: the
// active side's proof (the same over both nonces, as the active end); the link serves copies once
// it holds.  Neither side ever MACs a value the other chose alone, and nothing here is a MAC
// under the clients' token.
struct PeerAttachReq {
  PeerTicketId ticket{};
  std::array<uint8_t, 32> nonce{};
  RGPU_FIELDS(ticket, nonce)
};
struct PeerAttachRep {
  std::array<uint8_t, 32> nonce{};
  std::array<uint8_t, 32> proof{};
  RGPU_FIELDS(nonce, proof)
};
struct PeerProveReq {
  std::array<uint8_t, 32> proof{};
  RGPU_FIELDS(proof)
};
using PeerProveRep = Empty;
// Active -> passive, one per copy: its rows on the passive server (`height` rows of `width` bytes,
// `pitch` apart, from `ptr` on GPU `device`), which must lie in one allocation of the session.
// Asynchronous: a refusal comes back at the copy's PeerFinish or PeerRead.
struct PeerBeginReq {
  uint32_t device = 0;
  uint64_t ptr = 0;
  uint64_t pitch = 0;
  uint64_t width = 0;
  uint64_t height = 0;
  uint64_t fence = 0;  // PeerFenceReq::fence, 0 for none
  RGPU_FIELDS(device, ptr, pitch, width, height, fence)
};
// Bytes of the copy's rows, from `offset` (counted in the packed rows: row r starts at r*width).
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
// Active -> passive, once per plain link, when the passive's Hello named it: `host` is the active
// rgpud's machine (its boot id).  On the same machine (and backend that can share GPU memory,
// CUDA IPC) the passive answers the name of a unix socket (abstract, random) it listens on for
// one connection that must show `nonce` first; over that socket it then hands the active server
// descriptors of the memory of later copies (PeerIpcMap), and the copies become the GPUs' own
// device-to-device DMA.  Refused: the link copies through staging buffers, as before.
struct PeerIpcOpenReq {
  std::string host;
  RGPU_FIELDS(host)
};
struct PeerIpcOpenRep {
  std::string socket;  // abstract unix socket name (without its leading NUL)
  PeerSecret nonce{};
  RGPU_FIELDS(socket, nonce)
};
// Active -> passive, on a link with a unix socket: the passive session's fence page (a memfd,
// server/peer_fences.h) follows over the socket once the reply says yes, with the link's own
// slot in it.  Copies through memory mapped earlier then need no round trip.  Refused: every
// copy asks the passive server, as before.
using PeerFencePageReq = Empty;
struct PeerFencePageRep {
  uint32_t slot = 0;
  RGPU_FIELDS(slot)
};
// Active -> passive, after a PeerBegin, on a link with a unix socket: the begun copy's rows as
// memory the active server maps.  `ipc` 0: not shareable (the copy goes on with PeerRead or
// PeerWrite); 1: the rows lie at `offset` into the export of `size` bytes at `base` (on the
// copy's GPU there; backend kind `kind`), whose descriptor came over the unix socket just now
// when `fd_follows` is 1, and which the active server holds already otherwise.  `drops`: exports
// (triples importer, device, base) whose memory has left the passive server (freed): the active
// server unmaps them.  The copy ends with PeerIpcDone once the active server's DMA completed.
// An error reply: the copy fails (its PeerBegin's refusal).
struct PeerIpcMapReq {
  uint32_t importer = 0;         // the active server's GPU that maps the memory
  std::vector<uint64_t> forget;  // exports the active server unmapped on its own (as `drops`)
  RGPU_FIELDS(importer, forget)
};
struct PeerIpcMapRep {
  uint32_t ipc = 0;
  uint32_t fd_follows = 0;
  uint32_t kind = 0;
  uint64_t base = 0;
  uint64_t size = 0;
  uint64_t offset = 0;
  std::vector<uint64_t> drops;
  RGPU_FIELDS(ipc, fd_follows, kind, base, size, offset, drops)
};
// Active -> passive (asynchronous): the copy PeerIpcMap mapped has completed.
using PeerIpcDoneReq = Empty;
using PeerIpcDoneRep = Empty;
// Active -> passive, when a direct copy has waited long for the fence page's `reached` of GPU
// `device`: the passive's legacy stream there is still busy (an error: cudaErrorNotReady), idle
// (success: a fence it never stored is lost) or broken (its error).  The active server fails
// the waiting copies unless it is busy.
struct PeerFenceQueryReq {
  uint32_t device = 0;
  RGPU_FIELDS(device)
};
using PeerFenceQueryRep = Empty;

// PeerWrite: `size` bytes follow, to be written at `offset` (asynchronous: errors come back at
// PeerFinish).  PeerRead: the bytes come back as AsyncData frames (offsets relative to the
// request's), then the reply.  PeerFinish: every write has reached the GPU.
using PeerWriteRep = Empty;
using PeerReadRep = Empty;
using PeerFinishReq = Empty;
using PeerFinishRep = Empty;
using PeerBeginRep = Empty;
using PeerFenceRep = Empty;
using PeerCopyRep = Empty;

}  // namespace rgpu::proto
