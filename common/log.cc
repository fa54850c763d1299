#include "common/log.h"

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <string>

namespace rgpu::log {
namespace {

int parse_level(const char* v, Level fallback) {
  if (!v) return static_cast<int>(fallback);
  if (!strcmp(v, "error")) return 0;
  if (!strcmp(v, "warn")) return 1;
  if (!strcmp(v, "notice")) return 2;
  if (!strcmp(v, "info")) return 3;
  if (!strcmp(v, "debug")) return 4;
  return static_cast<int>(fallback);
}

struct State {
  std::mutex mu;
  std::string prefix = "rgpu";
  int level = parse_level(getenv("RGPU_LOG"), Level::Warn);
  FILE* out = nullptr;  // null: stderr
};

std::atomic<Tap> g_tap{nullptr};

State& state() {
  static State* s = new State;  // never destroyed: usable from atexit handlers
  return *s;
}

const char* level_name(Level l) {
  switch (l) {
    case Level::Error:
      return "error";
    case Level::Warn:
      return "warning";
    case Level::Notice:
      return nullptr;
    case Level::Info:
      return "info";
    case Level::Debug:
      return "debug";
  }
  return "";
}

}  // namespace

void init(const char* component, Level default_level) {
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mu);
  s.prefix = component;
  s.level = parse_level(getenv("RGPU_LOG"), default_level);
}

bool enabled(Level level) {
  if (level <= Level::Warn && g_tap.load(std::memory_order_relaxed)) return true;
  return static_cast<int>(level) <= state().level;
}

void set_tap(Tap tap) { g_tap.store(tap); }

void write(Level level, const char* fmt, ...) {
  char msg[2048];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  if (level <= Level::Warn)
    if (Tap tap = g_tap.load()) tap(level, msg);
  State& s = state();
  if (static_cast<int>(level) > s.level) return;
  std::lock_guard<std::mutex> lock(s.mu);
  FILE* out = s.out ? s.out : stderr;
  if (const char* name = level_name(level))
    fprintf(out, "%s: %s: %s\n", s.prefix.c_str(), name, msg);
  else
    fprintf(out, "%s: %s\n", s.prefix.c_str(), msg);
  fflush(out);
}

bool set_output(int fd) {
  FILE* f = fdopen(fd, "w");
  if (!f) return false;
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mu);
  if (s.out) fclose(s.out);  // writers use it under the lock only
  s.out = f;
  return true;
}

}  // namespace rgpu::log
