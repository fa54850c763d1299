// Client operations on contexts and on modules loaded from raw images: what the driver-API
// front-end calls (the runtime reaches contexts only through set_current_device/current_device).
#include "client/client.h"
#include "common/log.h"

namespace rgpu::client {

using namespace rgpu::proto;

void Client::release_contents(const ContextContents& c) {
  for (Stream* s : c.streams) {
    {
      std::lock_guard<std::mutex> lock(objects_mu_);
      if (!streams_.erase(s)) continue;  // destroyed meanwhile
    }
    CudaError e;
    if (ServerLink* l = link(s->device, &e))
      l->call<StreamDestroyMsg>(ObjectReq{devices_[s->device].spec.gpu, s->id});
    delete s;
  }
  for (Event* ev : c.events) {
    {
      std::lock_guard<std::mutex> lock(objects_mu_);
      if (!events_.erase(ev)) continue;
    }
    CudaError e;
    if (ServerLink* l = link(ev->device, &e))
      l->call<EventDestroyMsg>(ObjectReq{devices_[ev->device].spec.gpu, ev->id});
    delete ev;
  }
  for (Module* m : c.modules) modules_.unload(m);
}

Error Client::context_create(int dev, unsigned flags, Context** out) {
  if (Error e = check_device(dev); e != err::Success) return e;
  return contexts_.create(dev, flags, out);
}

Error Client::context_destroy(Context* ctx) {
  ContextContents released;
  if (Error e = contexts_.destroy(ctx, &released); e != err::Success) return e;
  release_contents(released);
  return err::Success;
}

Error Client::primary_release(int dev) {
  ContextContents released;
  if (Error e = contexts_.primary_release(dev, &released); e != err::Success) return e;
  release_contents(released);
  return err::Success;
}

Error Client::primary_reset(int dev) {
  ContextContents released;
  if (Error e = contexts_.primary_reset(dev, &released); e != err::Success) return e;
  release_contents(released);
  runtime_retained_[dev] = false;
  return reset(dev);
}

Error Client::context_synchronize() {
  Context* ctx = nullptr;
  if (Error e = current_context(&ctx); e != err::Success) return e;
  return synchronize(ctx->device);
}

Error Client::module_load(const void* image, size_t size, Module** out) {
  Context* ctx = nullptr;
  if (Error e = current_context(&ctx); e != err::Success) return e;
  Module* m = nullptr;
  if (Error e = modules_.load_image(image, size, &m); e != err::Success) return e;
  if (Error e = contexts_.adopt(ctx, m); e != err::Success) {
    modules_.unload(m);
    return e;
  }
  *out = m;
  return err::Success;
}

Error Client::module_unload(Module* m) {
  Context* ctx = nullptr;
  if (Error e = current_context(&ctx); e != err::Success) return e;
  if (Error e = modules_.unload(m); e != err::Success) return e;
  contexts_.disown(ctx, m);
  return err::Success;
}

}  // namespace rgpu::client
