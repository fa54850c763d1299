// Logging for rgpu: one line per message on stderr, prefixed with the component name.
// Level from RGPU_LOG; the client library defaults to warn, the daemon and CLI to notice.
#pragma once

#include <cstdarg>

namespace rgpu::log {

enum class Level { Error = 0, Warn = 1, Notice = 2, Info = 3, Debug = 4 };

// Sets the prefix printed before each line ("rgpu", "rgpud[1234]") and the level: RGPU_LOG when
// set (error, warn, notice, info, debug), else `default_level`.
void init(const char* component, Level default_level = Level::Warn);
bool enabled(Level level);
void write(Level level, const char* fmt, ...) __attribute__((format(printf, 2, 3)));
// Log lines go to `fd` (owned from now on) instead of stderr; false when it cannot be used.
bool set_output(int fd);
// While a tap is set, every error and warning line (whatever RGPU_LOG says) is also handed to it,
// without the prefix, under no lock of the log (the client's logs API: client/logs.h).
using Tap = void (*)(Level level, const char* line);
void set_tap(Tap tap);

}  // namespace rgpu::log

#define RGPU_LOG(level, ...)                                      \
  do {                                                            \
    if (::rgpu::log::enabled(::rgpu::log::Level::level))          \
      ::rgpu::log::write(::rgpu::log::Level::level, __VA_ARGS__); \
  } while (0)
#define LOG_ERROR(...) RGPU_LOG(Error, __VA_ARGS__)
#define LOG_WARN(...) RGPU_LOG(Warn, __VA_ARGS__)
#define LOG_NOTICE(...) RGPU_LOG(Notice, __VA_ARGS__)
#define LOG_INFO(...) RGPU_LOG(Info, __VA_ARGS__)
#define LOG_DEBUG(...) RGPU_LOG(Debug, __VA_ARGS__)
