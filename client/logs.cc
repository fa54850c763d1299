#include "client/logs.h"

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstring>
#include <thread>
#include <vector>

#include "client/client.h"
#include "client/core_table.h"
#include "common/log.h"

namespace rgpu::client {
namespace {

// This library's pointer to the process's log (the one Client's); set by bind_library.
std::atomic<Logs*> g_logs{nullptr};

void tap(log::Level level, const char* line) {
  Logs::get().add(level == log::Level::Error ? Logs::Error : Logs::Warning, line);
}

std::string truncated_note(uint32_t lost) {
  return "[rgpu: " + std::to_string(lost) + " older log message(s) were dropped]";
}

}  // namespace

Logs& Logs::get() {
  if (Logs* l = g_logs.load(std::memory_order_acquire)) return *l;
  return Client::get().logs();  // binds g_logs
}

void bind_library(Client* c) {
  g_logs.store(&c->logs(), std::memory_order_release);
  log::set_tap(tap);
}

void Logs::add(Level level, const std::string& message) {
  std::lock_guard<std::mutex> lock(mu_);
  kept_.push_back(Entry{level, message});
  bytes_ += message.size() + 1;
  while (bytes_ > kMaxBytes && kept_.size() > 1) {
    bytes_ -= kept_.front().text.size() + 1;
    kept_.pop_front();
    ++first_;
  }
  if (!callbacks_.empty()) {
    to_deliver_.push_back(Entry{level, message});
    cv_.notify_one();
  }
}

uint32_t Logs::current() {
  std::lock_guard<std::mutex> lock(mu_);
  return first_ + static_cast<uint32_t>(kept_.size());
}

std::string Logs::dump(uint32_t* it) {
  std::lock_guard<std::mutex> lock(mu_);
  const uint32_t end = first_ + static_cast<uint32_t>(kept_.size());
  uint32_t from = it ? *it : first_;
  std::string out;
  if (static_cast<int32_t>(from - first_) < 0) {
    out = truncated_note(first_ - from) + "\n";
    from = first_;
  }
  for (uint32_t i = from; static_cast<int32_t>(end - i) > 0; ++i)
    out += kept_[i - first_].text + "\n";
  if (it) *it = end;
  return out;
}

CudaError Logs::dump_to_file(uint32_t* it, const char* path) {
  if (!path) return err::InvalidValue;
  uint32_t next = it ? *it : 0;
  std::string text = dump(it ? &next : nullptr);
  FILE* f = std::fopen(path, "w");
  if (!f) return err::InvalidValue;
  const bool ok = std::fwrite(text.data(), 1, text.size(), f) == text.size();
  if (std::fclose(f) != 0 || !ok) return err::InvalidValue;
  if (it) *it = next;
  return err::Success;
}

CudaError Logs::dump_to_memory(uint32_t* it, char* buffer, size_t* size) {
  std::lock_guard<std::mutex> lock(mu_);
  const uint32_t end = first_ + static_cast<uint32_t>(kept_.size());
  uint32_t from = it ? *it : first_;
  uint32_t lost = 0;
  if (static_cast<int32_t>(from - first_) < 0) {
    lost = first_ - from;
    from = first_;
  }
  if (from == end) {
    if (*size) buffer[0] = '\0';
    *size = 0;
    if (it) *it = end;
    return err::Success;
  }
  // The most recent messages that fit, with room for the zero and, when some are left out, the
  // line that says so.
  const size_t room = *size ? *size - 1 : 0;
  size_t used = 0;
  uint32_t start = end;
  while (start != from) {
    size_t need = kept_[start - 1 - first_].text.size() + 1;
    uint32_t left_out = (start - 1 - from) + lost;
    size_t note = left_out ? truncated_note(left_out).size() + 1 : 0;
    if (used + need + note > room) break;
    used += need;
    --start;
  }
  if (start == end) {  // not even the latest message fits: what fits of it, as natively
    const std::string& last = kept_[end - 1 - first_].text;
    const size_t n = std::min(room, last.size());
    memcpy(buffer, last.data(), n);
    if (*size) buffer[n] = '\0';
    *size = n;
    if (it) *it = end;
    return err::Success;
  }
  std::string out;
  if (uint32_t left_out = (start - from) + lost) out = truncated_note(left_out) + "\n";
  for (uint32_t i = start; i != end; ++i) out += kept_[i - first_].text + "\n";
  memcpy(buffer, out.data(), out.size());
  buffer[out.size()] = '\0';
  *size = out.size();
  if (it) *it = end;
  return err::Success;
}

uint64_t Logs::add_callback(Callback fn, void* data) {
  std::lock_guard<std::mutex> lock(mu_);
  uint64_t h = next_callback_++;
  callbacks_[h] = {fn, data};
  if (!thread_started_) {
    thread_started_ = true;
    std::thread([this] { deliver(); }).detach();  // lives as long as the process
  }
  return h;
}

bool Logs::remove_callback(uint64_t handle) {
  std::lock_guard<std::mutex> lock(mu_);
  return callbacks_.erase(handle) != 0;
}

void Logs::deliver() {
  std::unique_lock<std::mutex> lock(mu_);
  for (;;) {
    cv_.wait(lock, [&] { return !to_deliver_.empty(); });
    Entry e = std::move(to_deliver_.front());
    to_deliver_.pop_front();
    std::vector<std::pair<Callback, void*>> targets;
    for (auto& [h, cb] : callbacks_) targets.push_back(cb);
    lock.unlock();
    for (auto& [fn, data] : targets) {
      std::string copy = e.text;  // the callback gets a writable copy
      fn(data, e.level, copy.data(), copy.size());
    }
    lock.lock();
  }
}

}  // namespace rgpu::client
