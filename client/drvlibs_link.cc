// cuLink* on the client core (issue 12, drvlibs): the link state lives on the server, whose driver
// links; inputs travel as payloads (files are read by the front-end), and the linked image comes
// back in pieces after LinkComplete and stays here until the state is destroyed
// (server/drvlibs_link.cc).
#include <sys/uio.h>

#include "client/client.h"
#include "common/log.h"

namespace rgpu::client {

using namespace rgpu::proto;

CudaError Client::link_create(LinkState** out) {
  if (!out) return err::InvalidValue;
  const int dev = current_device();
  CudaError e;
  ServerLink* l = link(dev, &e);
  if (!l) return e;
  auto* s = new LinkState;
  s->device = dev;
  s->id = l->new_id();
  if (Error r = forward<LinkCreateMsg>(dev, LinkReq{0, s->id}); r != err::Success) {
    delete s;
    return r;
  }
  std::lock_guard<std::mutex> lock(link_states_mu_);
  link_states_.insert(s);
  *out = s;
  return err::Success;
}

Client::LinkState* Client::link_of(const void* h) {
  auto* s = static_cast<LinkState*>(const_cast<void*>(h));
  std::lock_guard<std::mutex> lock(link_states_mu_);
  return link_states_.count(s) ? s : nullptr;
}

CudaError Client::link_add(LinkState* s, uint32_t type, const void* data, size_t size,
                           const std::string& name) {
  if (!s || !data || size == 0) return err::InvalidValue;
  CudaError e;
  ServerLink* l = link(s->device, &e);
  if (!l) return e;
  LinkAddDataReq q;
  q.device = devices_[s->device].spec.gpu;
  q.link = s->id;
  q.type = type;
  q.name = name;
  q.size = size;
  iovec v{const_cast<void*>(data), size};
  return l->call<LinkAddDataMsg>(q, nullptr, &v, 1);
}

CudaError Client::link_complete(LinkState* s, const void** image, size_t* size) {
  if (!s || !image || !size) return err::InvalidValue;
  CudaError e;
  ServerLink* l = link(s->device, &e);
  if (!l) return e;
  const uint32_t gpu = devices_[s->device].spec.gpu;
  LinkCompleteRep rep;
  if (CudaError r = l->call<LinkCompleteMsg>(LinkReq{gpu, s->id}, &rep); r != err::Success)
    return r;
  std::vector<uint8_t> out;
  out.reserve(rep.size);
  while (out.size() < rep.size) {
    LinkReadRep piece;
    if (CudaError r = l->call<LinkReadMsg>(LinkReadReq{gpu, s->id, out.size()}, &piece);
        r != err::Success)
      return r;
    if (piece.bytes.empty() || piece.bytes.size() > rep.size - out.size()) {
      LOG_ERROR("cuLinkComplete: the server sent a piece of %zu bytes at %zu of a %llu-byte image",
                piece.bytes.size(), out.size(), static_cast<unsigned long long>(rep.size));
      return err::Unknown;
    }
    out.insert(out.end(), piece.bytes.begin(), piece.bytes.end());
  }
  s->image = std::move(out);
  *image = s->image.data();
  *size = s->image.size();
  return err::Success;
}

CudaError Client::link_destroy(LinkState* s) {
  {
    std::lock_guard<std::mutex> lock(link_states_mu_);
    if (!s || !link_states_.erase(s)) return err::InvalidValue;
  }
  CudaError r = forward<LinkDestroyMsg>(s->device, LinkReq{0, s->id});
  delete s;
  return r;
}

}  // namespace rgpu::client
