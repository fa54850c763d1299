// cuLink* on the server (issue 12, drvlibs): a link state per client id, whose inputs the
// backend's driver adds as they arrive (so a bad input fails at cuLinkAddData, as on NVIDIA's
// driver); the linked image is kept until the client has read it and destroys the state.
#include <algorithm>
#include <string>

#include "server/session.h"

namespace rgpu::server {

using namespace rgpu::proto;
using Status = backend::Status;

namespace {
constexpr size_t kMaxLinks = 64;                  // link states a session holds at once
constexpr uint64_t kMaxLinkBytes = 512ull << 20;  // input bytes of one link state
constexpr uint32_t kLastInputType = 5;            // CU_JIT_INPUT_NVVM
constexpr CudaError kInvalidHandle = 400;

Status no_link() { return Status::fail(kInvalidHandle, "no such link state in this session"); }
}  // namespace

Status Session::on(LinkCreateMsg, const LinkReq& q, Empty&) {
  if (Status s = check_device(q.device); !s.ok()) return s;
  if (q.link == 0 || links_.count(q.link)) return Status::fail(err::InvalidValue, "bad link id");
  if (links_.size() >= kMaxLinks)
    return Status::fail(err::MemoryAllocation,
                        "this session already holds " + std::to_string(kMaxLinks) + " link states");
  uint64_t h = 0;
  if (Status s = exec_.link_create(static_cast<int>(q.device), h); !s.ok()) return s;
  links_[q.link] = LinkState{q.device, h, 0, {}};
  return Status::success();
}

Status Session::on(LinkAddDataMsg, const LinkAddDataReq& q, Empty&) {
  auto it = links_.find(q.link);
  if (it == links_.end() || it->second.device != q.device) return no_link();
  LinkState& l = it->second;
  if (q.type > kLastInputType)
    return Status::fail(err::InvalidValue, "unknown link input type " + std::to_string(q.type));
  if (q.size == 0 || q.size > kMaxLinkBytes - l.added)
    return Status::fail(err::InvalidValue, "link input of " + std::to_string(q.size) +
                                               " bytes (a link state takes at most " +
                                               std::to_string(kMaxLinkBytes >> 20) + " MiB)");
  if (!l.image.empty()) return Status::fail(err::InvalidValue, "the link state is completed");
  std::vector<uint8_t> data;
  data.reserve(std::min<uint64_t>(q.size, 64u << 20));
  if (current_->payload->gather(data) != q.size)
    return Status::fail(err::InvalidValue, "the client went away in the middle of a link input");
  l.added += q.size;
  return exec_.link_add(static_cast<int>(q.device), l.handle, q.type, q.name, data.data(),
                        data.size());
}

Status Session::on(LinkCompleteMsg, const LinkReq& q, LinkCompleteRep& rep) {
  auto it = links_.find(q.link);
  if (it == links_.end() || it->second.device != q.device) return no_link();
  LinkState& l = it->second;
  if (l.image.empty()) {
    if (Status s = exec_.link_complete(static_cast<int>(q.device), l.handle, l.image); !s.ok())
      return s;
    if (l.image.empty()) return Status::fail(err::Unknown, "the link produced no image");
  }
  rep.size = l.image.size();
  return Status::success();
}

Status Session::on(LinkReadMsg, const LinkReadReq& q, LinkReadRep& rep) {
  auto it = links_.find(q.link);
  if (it == links_.end() || it->second.device != q.device) return no_link();
  const std::vector<uint8_t>& image = it->second.image;
  if (image.empty() || q.offset >= image.size())
    return Status::fail(err::InvalidValue, "link image read beyond its end (or not linked yet)");
  const uint64_t n = std::min<uint64_t>(kLinkReadBytes, image.size() - q.offset);
  rep.bytes.assign(image.begin() + static_cast<ptrdiff_t>(q.offset),
                   image.begin() + static_cast<ptrdiff_t>(q.offset + n));
  return Status::success();
}

Status Session::on(LinkDestroyMsg, const LinkReq& q, Empty&) {
  auto it = links_.find(q.link);
  if (it == links_.end() || it->second.device != q.device) return no_link();
  const LinkState l = std::move(it->second);
  links_.erase(it);
  return exec_.link_destroy(static_cast<int>(l.device), l.handle);
}

void Session::destroy_links() {
  for (auto& [id, l] : links_) exec_.link_destroy(static_cast<int>(l.device), l.handle);
  links_.clear();
}

}  // namespace rgpu::server
