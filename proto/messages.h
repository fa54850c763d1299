// The rgpu message catalogue: every message's fields, declared once.
//
// A request type is <Name>Req and its reply <Name>Rep; the catalogue (catalogue.def) gives each its
// id, whether it is synchronous (the client waits for the reply) or asynchronous (no reply unless
// it fails: the failure comes back as an AsyncError and is reported at the next synchronizing
// call), and whether a bulk payload follows the request (In) or the reply (Out).
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "proto/wire.h"

namespace rgpu::proto {

constexpr uint32_t kMagic = 0x55504752;  // "RGPU" little-endian
// The framing and handshake generation.  Messages are not versioned by it: a new or changed
// message takes a new id, and the handshake's `known` lists say which ids each side has.
constexpr uint32_t kProtocolVersion = 4;

enum class Mode : uint8_t { Sync, Async };
enum class Payload : uint8_t { None, In, Out };

struct Empty {
  RGPU_NO_FIELDS
};

// ---- session
// -------------------------------------------------------------------------------------- Hello's
// first two fields (magic, version) keep their place in every protocol version, so that a server
// can name both versions when they differ.
struct HelloReq {
  uint32_t magic = kMagic;
  uint32_t version = kProtocolVersion;
  std::string arch;         // "x86_64-le-lp64": the client's CPU, byte order and data model
  std::string client_info;  // host, pid and program, for the server's log
  // The client's RGPU_TIMEOUT in milliseconds (0: none): while a request is queued or in progress
  // the server sends Heartbeat frames often enough that a live server is never taken for a dead
  // one (every timeout_ms / 4, between 100 ms and 1 s; every 1 s when 0).
  uint32_t timeout_ms = 0;
  // Every message id this side knows: requests it may send and frames it understands unasked.
  std::vector<uint16_t> known;
  // Later protocol versions may add fields here, at the end (decode_message_prefix).
  // What the link is for (LinkPurpose, proto/messages_nvml.h): 0, a session; 1, queries only.
  uint32_t purpose = 0;
  RGPU_FIELDS(magic, version, arch, client_info, timeout_ms, known, purpose)
};
struct HelloRep {
  uint32_t magic = kMagic;
  uint32_t version = kProtocolVersion;
  bool auth_required = false;
  std::array<uint8_t, 32> challenge{};  // nonce for the token challenge-response
  uint32_t gpu_count = 0;
  int32_t driver_version = 0;
  std::string backend;  // "cuda" or "host"
  std::string server_info;
  // Bytes of asynchronous host-to-device payload the client may have outstanding (sent, not yet
  // given back by PayloadDone): the server's page-locked payload budget.
  uint64_t payload_window = 0;
  // Every message id the server knows: requests it serves and frames it may send unasked.  The
  // client answers a request the server does not know with cudaErrorNotSupported itself.
  std::vector<uint16_t> known;
  RGPU_FIELDS(magic, version, auth_required, challenge, gpu_count, driver_version, backend,
              server_info, payload_window, known)
};
struct AuthReq {
  std::array<uint8_t, 32> mac{};  // HMAC-SHA256(token, "rgpu-auth-v1" || challenge)
  RGPU_FIELDS(mac)
};
using AuthRep = Empty;
using PingReq = Empty;
using PingRep = Empty;

// Sent by the server, unasked, when an asynchronous request failed.
struct AsyncErrorMsg {
  uint64_t request_id = 0;
  uint16_t msg_type = 0;
  int32_t error = 0;
  std::string message;
  RGPU_FIELDS(request_id, msg_type, error, message)
};

// Sent by the server, unasked, while the session has requests queued or in progress and nothing
// else went out for a while: the server is alive (busy, e.g. a long kernel), not gone.
struct HeartbeatMsg {
  uint32_t requests = 0;  // requests queued or in progress
  RGPU_FIELDS(requests)
};

// ---- devices
// --------------------------------------------------------------------------------------
struct DeviceReq {
  uint32_t device = 0;  // GPU index on this server
  RGPU_FIELDS(device)
};
struct DeviceAttr {
  uint32_t id = 0;  // cudaDeviceAttr / CUdevice_attribute number
  int32_t value = 0;
  RGPU_FIELDS(id, value)
};
using GetDeviceInfoReq = DeviceReq;
struct GetDeviceInfoRep {
  std::string name;
  std::array<uint8_t, 16> uuid{};
  uint64_t total_mem = 0;
  std::vector<DeviceAttr> attrs;
  RGPU_FIELDS(name, uuid, total_mem, attrs)
};
using DeviceSynchronizeReq = DeviceReq;
using DeviceSynchronizeRep = Empty;
using DeviceResetReq = DeviceReq;
using DeviceResetRep = Empty;
// The client's small allocations (client/small_allocs.h) close quarantine epoch `epoch` of GPU
// `device` (epochs are counted per address window): the server marks the work issued before this
// request (nothing when the device is idle) and answers, without waiting for the GPU, that the work
// before every epoch below `complete` is done.  Reports none of that work's errors (the program's
// own synchronizations do).
struct SmallReclaimReq {
  uint32_t device = 0;
  uint64_t window = 0;  // the virtual device's address window (two may name one GPU)
  uint64_t epoch = 0;
  RGPU_FIELDS(device, window, epoch)
};
struct SmallReclaimRep {
  uint64_t complete = 0;
  RGPU_FIELDS(complete)
};
using MemGetInfoReq = DeviceReq;
struct MemGetInfoRep {
  uint64_t free = 0;
  uint64_t total = 0;
  RGPU_FIELDS(free, total)
};

// ---- memory
// ---------------------------------------------------------------------------------------
// `window`: base of the virtual device's address window (AddressWindow); 0: the GPU's default.
struct MallocReq {
  uint32_t device = 0;
  uint64_t size = 0;
  uint64_t window = 0;
  RGPU_FIELDS(device, size, window)
};
struct MallocRep {
  uint64_t ptr = 0;
  RGPU_FIELDS(ptr)
};
struct FreeReq {
  uint32_t device = 0;
  uint64_t ptr = 0;
  RGPU_FIELDS(device, ptr)
};
using FreeRep = Empty;
// The address window [base, base + size) of one virtual device on GPU `device`: every allocation
// made for it lands inside (the client reserved the window in its own address space, so device
// addresses are unique across all of its servers).  Sent once, before the device's first Malloc.
struct AddressWindowReq {
  uint32_t device = 0;
  uint64_t base = 0;
  uint64_t size = 0;
  RGPU_FIELDS(device, base, size)
};
using AddressWindowRep = Empty;

// Host to device: `size` payload bytes follow the request.
struct MemcpyHtoDReq {
  uint32_t device = 0;
  uint64_t dst = 0;
  uint64_t size = 0;
  RGPU_FIELDS(device, dst, size)
  uint64_t payload_bytes() const { return size; }
};
using MemcpyHtoDRep = Empty;
// Device to host: `size` payload bytes follow the reply.
struct MemcpyDtoHReq {
  uint32_t device = 0;
  uint64_t src = 0;
  uint64_t size = 0;
  RGPU_FIELDS(device, src, size)
  uint64_t payload_bytes() const { return size; }
};
using MemcpyDtoHRep = Empty;
struct MemcpyDtoDReq {
  uint32_t device = 0;
  uint64_t dst = 0;
  uint64_t src = 0;
  uint64_t size = 0;
  uint64_t stream = 0;
  RGPU_FIELDS(device, dst, src, size, stream)
};
using MemcpyDtoDRep = Empty;
struct MemsetReq {
  uint32_t device = 0;
  uint64_t ptr = 0;
  uint8_t value = 0;
  uint64_t size = 0;
  uint64_t stream = 0;
  RGPU_FIELDS(device, ptr, value, size, stream)
};
using MemsetRep = Empty;

// 2D copies: `height` rows of `width` bytes; rows are packed (width bytes each) in the payload.
struct Memcpy2DHtoDReq {
  uint32_t device = 0;
  uint64_t dst = 0;
  uint64_t dpitch = 0;
  uint64_t width = 0;
  uint64_t height = 0;
  RGPU_FIELDS(device, dst, dpitch, width, height)
  uint64_t payload_bytes() const { return width * height; }
};
using Memcpy2DHtoDRep = Empty;
struct Memcpy2DDtoHReq {
  uint32_t device = 0;
  uint64_t src = 0;
  uint64_t spitch = 0;
  uint64_t width = 0;
  uint64_t height = 0;
  RGPU_FIELDS(device, src, spitch, width, height)
  uint64_t payload_bytes() const { return width * height; }
};
using Memcpy2DDtoHRep = Empty;
struct Memcpy2DDtoDReq {
  uint32_t device = 0;
  uint64_t dst = 0;
  uint64_t dpitch = 0;
  uint64_t src = 0;
  uint64_t spitch = 0;
  uint64_t width = 0;
  uint64_t height = 0;
  uint64_t stream = 0;
  RGPU_FIELDS(device, dst, dpitch, src, spitch, width, height, stream)
};
using Memcpy2DDtoDRep = Empty;

// Asynchronous copies on a stream.  Host to device: the rows travel with the request (captured at
// the call, as CUDA stages pageable memory).  Device to host: the rows come back, when the stream
// has done the copy, in AsyncData frames carrying this request's id.
struct MemcpyHtoDAsyncReq {
  uint32_t device = 0;
  uint64_t dst = 0;
  uint64_t dpitch = 0;
  uint64_t width = 0;
  uint64_t height = 0;
  uint64_t stream = 0;
  RGPU_FIELDS(device, dst, dpitch, width, height, stream)
  uint64_t payload_bytes() const { return width * height; }
};
using MemcpyHtoDAsyncRep = Empty;
struct MemcpyDtoHAsyncReq {
  uint32_t device = 0;
  uint64_t src = 0;
  uint64_t spitch = 0;
  uint64_t width = 0;
  uint64_t height = 0;
  uint64_t stream = 0;
  RGPU_FIELDS(device, src, spitch, width, height, stream)
};
using MemcpyDtoHAsyncRep = Empty;
// The same copy into pageable memory, which CUDA makes synchronous: the data comes back as for
// Memcpy2DDtoH, after the stream's earlier work.
using MemcpyDtoHStreamReq = MemcpyDtoHAsyncReq;
using MemcpyDtoHStreamRep = Empty;
// Sent by the server: `payload_len` bytes of an asynchronous device-to-host copy, at `offset` in
// its packed rows.
struct AsyncDataMsg {
  uint64_t offset = 0;
  bool last = false;
  RGPU_FIELDS(offset, last)
};
struct MemcpyPeerReq {
  uint32_t dst_device = 0;
  uint64_t dst = 0;
  uint32_t src_device = 0;
  uint64_t src = 0;
  uint64_t size = 0;
  uint32_t stream_device = 0;  // the stream's GPU: either of the two
  uint64_t stream = 0;
  RGPU_FIELDS(dst_device, dst, src_device, src, size, stream_device, stream)
};
using MemcpyPeerRep = Empty;
struct PeerReq {
  uint32_t device = 0;
  uint32_t peer = 0;
  RGPU_FIELDS(device, peer)
};
using DeviceCanAccessPeerReq = PeerReq;
struct DeviceCanAccessPeerRep {
  int32_t can = 0;
  RGPU_FIELDS(can)
};
using DeviceEnablePeerReq = PeerReq;
using DeviceEnablePeerRep = Empty;

// ---- page-locked memory shared with a co-located client (shared-memory transport)
// ------------------- The client creates a memfd for cudaMallocHost, passes the descriptor beside
// the byte stream, and registers it: the server maps it and page-locks it for the GPU, so copies to
// and from it are one DMA with no byte crossing the transport.
struct HostShmRegisterReq {
  uint32_t device = 0;
  uint64_t id = 0;  // the client's name for the segment
  uint64_t size = 0;
  RGPU_FIELDS(device, id, size)
};
using HostShmRegisterRep = Empty;
struct HostShmUnregisterReq {
  uint64_t id = 0;
  RGPU_FIELDS(id)
};
using HostShmUnregisterRep = Empty;
struct MemcpyShmReq {
  uint32_t device = 0;
  uint64_t device_ptr = 0;
  uint64_t segment = 0;
  uint64_t offset = 0;  // in the segment
  uint64_t size = 0;
  bool to_device = true;
  uint64_t stream = 0;
  RGPU_FIELDS(device, device_ptr, segment, offset, size, to_device, stream)
};
using MemcpyShmRep = Empty;
using MemcpyShmAsyncReq = MemcpyShmReq;
using MemcpyShmAsyncRep = Empty;

// ---- streams, events, host callbacks
// ------------------------------------------------------------- Stream and event ids are chosen by
// the client (unique per connection, never 0), so creating one needs no round trip.  Stream 0 is
// the GPU's legacy default stream.
struct StreamCreateReq {
  uint32_t device = 0;
  uint64_t id = 0;
  uint32_t flags = 0;
  int32_t priority = 0;
  RGPU_FIELDS(device, id, flags, priority)
};
using StreamCreateRep = Empty;
struct ObjectReq {
  uint32_t device = 0;
  uint64_t id = 0;
  RGPU_FIELDS(device, id)
};
using StreamDestroyReq = ObjectReq;
using StreamDestroyRep = Empty;
using StreamSynchronizeReq = ObjectReq;
using StreamSynchronizeRep = Empty;
using StreamQueryReq = ObjectReq;
using StreamQueryRep = Empty;
struct StreamWaitEventReq {
  uint32_t device = 0;
  uint64_t stream = 0;
  uint64_t event = 0;
  RGPU_FIELDS(device, stream, event)
};
using StreamWaitEventRep = Empty;
using StreamPriorityRangeReq = DeviceReq;
struct StreamPriorityRangeRep {
  int32_t least = 0;
  int32_t greatest = 0;
  RGPU_FIELDS(least, greatest)
};
struct EventCreateReq {
  uint32_t device = 0;
  uint64_t id = 0;
  uint32_t flags = 0;
  RGPU_FIELDS(device, id, flags)
};
using EventCreateRep = Empty;
using EventDestroyReq = ObjectReq;
using EventDestroyRep = Empty;
struct EventRecordReq {
  uint32_t device = 0;
  uint64_t event = 0;
  uint64_t stream = 0;
  RGPU_FIELDS(device, event, stream)
};
using EventRecordRep = Empty;
using EventQueryReq = ObjectReq;
using EventQueryRep = Empty;
using EventSynchronizeReq = ObjectReq;
using EventSynchronizeRep = Empty;
struct EventElapsedReq {
  uint32_t device = 0;
  uint64_t start = 0;
  uint64_t end = 0;
  RGPU_FIELDS(device, start, end)
};
struct EventElapsedRep {
  uint32_t ms_bits = 0;  // IEEE-754 single precision
  RGPU_FIELDS(ms_bits)
};
// A host function queued on a stream: when the stream reaches it the server sends RunCallback
// and holds the stream until the client answers CallbackDone.
struct HostFuncReq {
  uint32_t device = 0;
  uint64_t stream = 0;
  uint64_t id = 0;
  RGPU_FIELDS(device, stream, id)
};
using HostFuncRep = Empty;
struct CallbackDoneReq {
  uint64_t id = 0;
  RGPU_FIELDS(id)
};
using CallbackDoneRep = Empty;
struct RunCallbackMsg {
  uint64_t id = 0;
  RGPU_FIELDS(id)
};

// ---- modules and kernels
// -------------------------------------------------------------------------
// A module is an image (fat binary, cubin, PTX) named by its SHA-256.  ModuleLookup asks for one
// the server already has (from this or an earlier session); ModuleLoad sends the image as
// payload.  Both resolve the kernels and variables the client registered, in the client's order.
// (What clients before lazy modules send; today's send ModuleHave/ModuleResolve/ModuleShip.)
using Hash = std::array<uint8_t, 32>;
struct VarName {
  std::string name;
  uint64_t size = 0;  // as the client registered it
  RGPU_FIELDS(name, size)
};
struct ModuleLookupReq {
  uint32_t device = 0;
  Hash hash{};
  std::vector<std::string> functions;
  std::vector<VarName> variables;
  RGPU_FIELDS(device, hash, functions, variables)
};
struct ModuleLoadReq {
  uint32_t device = 0;
  Hash hash{};
  uint64_t image_size = 0;
  std::vector<std::string> functions;
  std::vector<VarName> variables;
  RGPU_FIELDS(device, hash, image_size, functions, variables)
  uint64_t payload_bytes() const { return image_size; }
};
struct ParamDesc {
  uint32_t offset = 0;
  uint32_t size = 0;
  RGPU_FIELDS(offset, size)
};
struct KernelDesc {
  bool found = false;
  std::vector<ParamDesc> params;
  RGPU_FIELDS(found, params)
};
struct VarDesc {
  bool found = false;
  uint64_t addr = 0;
  uint64_t size = 0;
  RGPU_FIELDS(found, addr, size)
};
struct ModuleRep {
  uint32_t module = 0;  // the session's id for this module on this device
  std::vector<KernelDesc> kernels;
  std::vector<VarDesc> variables;
  RGPU_FIELDS(module, kernels, variables)
};
using ModuleLookupRep = ModuleRep;
using ModuleLoadRep = ModuleRep;

// Lazy modules: an image travels, and is loaded on a GPU, when a function or global of it is first
// needed there.  ModuleHave asks in one round trip which of many images the server already holds
// (this session's, or the module cache's; `held` has one byte per hash, 1 when held).
// ModuleResolve resolves names of an image the server holds, loading it on the GPU first if it is
// not loaded there yet; names carry the client's index for them (what launches name), so each is
// resolved once per GPU and names may come in any order.  ModuleShip sends the image as payload,
// then resolves as ModuleResolve.  The reply lists the names in the request's order.
struct ModuleHaveReq {
  std::vector<Hash> hashes;
  RGPU_FIELDS(hashes)
};
struct ModuleHaveRep {
  std::vector<uint8_t> held;
  RGPU_FIELDS(held)
};
struct NameAt {
  uint32_t index = 0;  // the client's index of the function or global in its module
  std::string name;
  uint64_t size = 0;  // a global's size as the client registered it (functions: 0)
  RGPU_FIELDS(index, name, size)
};
struct ModuleResolveReq {
  uint32_t device = 0;
  Hash hash{};
  std::vector<NameAt> functions;
  std::vector<NameAt> variables;
  RGPU_FIELDS(device, hash, functions, variables)
};
struct ModuleShipReq {
  uint32_t device = 0;
  Hash hash{};
  uint64_t image_size = 0;
  std::vector<NameAt> functions;
  std::vector<NameAt> variables;
  RGPU_FIELDS(device, hash, image_size, functions, variables)
  uint64_t payload_bytes() const { return image_size; }
};
// What ModuleResolve and ModuleShip answer: ModuleRep's fields, and for each function asked
// for the server's index of it in the module (FuncReq::kernel, LaunchReq::kernel).  The server
// numbers a module's functions by name: every client module of one image (the same fat binary
// registered twice, or loaded again through the driver API, its names asked for in another
// order) shares one server module, so a client's own numbering cannot name them.
struct ModuleSlotsRep {
  uint32_t module = 0;
  std::vector<KernelDesc> kernels;
  std::vector<VarDesc> variables;
  std::vector<uint32_t> slots;  // per function asked for, in order
  RGPU_FIELDS(module, kernels, variables, slots)
};
using ModuleResolveRep = ModuleSlotsRep;
using ModuleShipRep = ModuleSlotsRep;

struct LaunchReq {
  uint32_t device = 0;
  uint32_t module = 0;
  uint32_t kernel = 0;  // index into the module's functions
  uint32_t gx = 1, gy = 1, gz = 1;
  uint32_t bx = 1, by = 1, bz = 1;
  uint32_t shared_mem = 0;
  uint64_t stream = 0;        // 0: the legacy default stream
  std::vector<uint8_t> args;  // the parameter buffer, packed by the kernel's layout
  RGPU_FIELDS(device, module, kernel, gx, gy, gz, bx, by, bz, shared_mem, stream, args)
};
using LaunchRep = Empty;

struct FuncReq {
  uint32_t device = 0;
  uint32_t module = 0;
  uint32_t kernel = 0;
  RGPU_FIELDS(device, module, kernel)
};
using FuncGetAttributesReq = FuncReq;
struct FuncGetAttributesRep {
  std::vector<int32_t> values;  // CUfunction_attribute 0, 1, 2, ...
  RGPU_FIELDS(values)
};
struct FuncSetAttributeReq {
  FuncReq func;
  int32_t attr = 0;
  int32_t value = 0;
  RGPU_FIELDS(func, attr, value)
};
using FuncSetAttributeRep = Empty;
struct FuncSetCacheConfigReq {
  FuncReq func;
  int32_t config = 0;
  RGPU_FIELDS(func, config)
};
using FuncSetCacheConfigRep = Empty;
struct OccupancyReq {
  FuncReq func;
  int32_t block_size = 0;
  uint64_t dynamic_smem = 0;
  uint32_t flags = 0;
  RGPU_FIELDS(func, block_size, dynamic_smem, flags)
};
struct OccupancyRep {
  int32_t blocks = 0;
  RGPU_FIELDS(blocks)
};

// Sent by the server, unasked, before the reply of a synchronizing request: what kernels printed.
struct DeviceOutputMsg {
  std::vector<uint8_t> bytes;
  RGPU_FIELDS(bytes)
};

// Sent by the server, unasked, when it let go of `bytes` of asynchronous host-to-device payload
// (the stream is past the copy, or the request failed): flow control for the client's window.
// The server gathers these and sends them at least every MiB, and whenever it runs out of
// requests to serve.
// Asynchronous host-to-device payloads up to this size are consumed by the server as it serves
// the request (staged, as CUDA stages pageable memory), with no host function.
constexpr uint64_t kStagedPayloadMax = 64u << 10;
struct PayloadDoneMsg {
  uint64_t bytes = 0;
  RGPU_FIELDS(bytes)
};

#include "proto/messages_devmem.h"  // NOLINT(build/include_order)
#include "proto/messages_launch.h"
}  // namespace rgpu::proto
#include "proto/messages_arrays.h"   // NOLINT(build/include_order)
#include "proto/messages_drvlibs.h"  // NOLINT(build/include_order)
#include "proto/messages_graphs.h"   // IWYU pragma: export
#include "proto/messages_graphs3.h"  // NOLINT(build/include_order)
#include "proto/messages_graphs4.h"  // NOLINT(build/include_order)
#include "proto/messages_ipc.h"      // NOLINT(build/include_order)
#include "proto/messages_misc.h"     // NOLINT(build/include_order)
#include "proto/messages_notify.h"   // NOLINT(build/include_order)
#include "proto/messages_nvml.h"     // NOLINT(build/include_order)
#include "proto/messages_peer.h"     // NOLINT(build/include_order)
#include "proto/messages_pools.h"    // NOLINT(build/include_order)
#include "proto/messages_vmm.h"      // NOLINT(build/include_order)
#include "proto/messages_xorder.h"   // NOLINT(build/include_order)
namespace rgpu::proto {

// ---- the catalogue
// --------------------------------------------------------------------------------
enum class MsgId : uint16_t {
#define RGPU_MSG(name, id, mode, payload) name = id,
#define RGPU_PUSH(name, id, direction) name = id,
#include "proto/catalogue.def"
#undef RGPU_MSG
#undef RGPU_PUSH
};
// Who sends a frame that goes unasked.
enum class Direction : uint8_t { ToRequester, ToServer };

#define RGPU_MSG(NAME, ID, MODE, PAYLOAD)                \
  struct NAME##Msg {                                     \
    using Req = NAME##Req;                               \
    using Rep = NAME##Rep;                               \
    static constexpr MsgId id = MsgId::NAME;             \
    static constexpr const char* name = #NAME;           \
    static constexpr Mode mode = Mode::MODE;             \
    static constexpr Payload payload = Payload::PAYLOAD; \
  };
#include "proto/catalogue.def"
#undef RGPU_MSG

// Name of a frame type (request or pushed), or nullptr when the id is not in the catalogue.
const char* msg_name(uint16_t id);
// Looks up a request's properties; false when the id is not a request of the catalogue.
bool msg_info(uint16_t id, Mode* mode, Payload* payload);
// Looks up a pushed frame's direction; false when the id is not one.
bool push_info(uint16_t id, Direction* direction);
// Every id of the catalogue (requests and pushed frames), ascending: what this build knows.
const std::vector<uint16_t>& known_ids();

}  // namespace rgpu::proto
