// The client's error log (the runtime's logs API, cudaLogs*): on a local GPU it holds the driver's
// error and warning messages; here it holds the client library's own error and warning lines
// (common/log.h's tap, whatever RGPU_LOG says) and the server's reasons for the requests of this
// process that failed.  Messages are numbered from 0; an iterator is the number of the next
// message to read.  The oldest messages go once more than kMaxBytes are kept (as the driver's
// buffer), and a dump that starts before what is kept says so.  Registered callbacks get every new
// message on a thread of their own, in order, never under a lock of the caller.
#pragma once

#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <map>
#include <mutex>
#include <string>

#include "common/cuda_errors.h"

namespace rgpu::client {

class Logs {
 public:
  static constexpr size_t kMaxBytes = 25600;
  enum Level : int { Error = 0, Warning = 1 };  // cudaLogLevel's values
  using Callback = void (*)(void* data, int level, char* message, size_t length);

  // The process's log: the one Client's (client/core_table.h), whose making installs the tap on
  // common/log.h in each library that uses it.
  static Logs& get();

  void add(Level level, const std::string& message);
  // The iterator of the next message.
  uint32_t current();
  // Every kept message from `*it` (null: all kept) and what it cost, one per line; `*it` advances
  // to current().
  std::string dump(uint32_t* it);
  // cudaLogsDumpToMemory: `*size` is the buffer's bytes (with the terminating zero) in, the bytes
  // written (without it) out.  When not everything fits, a line saying so comes first, then the
  // most recent messages that fit.  InvalidValue when not even one fits.
  CudaError dump_to_memory(uint32_t* it, char* buffer, size_t* size);
  // cudaLogsDumpToFile: dump(it) written to `path` (replaced); InvalidValue when it cannot be
  // written, and then `*it` is unchanged.
  CudaError dump_to_file(uint32_t* it, const char* path);
  // Handles are nonzero.
  uint64_t add_callback(Callback fn, void* data);
  bool remove_callback(uint64_t handle);

 private:
  struct Entry {
    Level level;
    std::string text;
  };
  void deliver();  // the callback thread

  std::mutex mu_;
  std::deque<Entry> kept_;
  uint32_t first_ = 0;  // the number of kept_.front()
  size_t bytes_ = 0;
  std::map<uint64_t, std::pair<Callback, void*>> callbacks_;
  uint64_t next_callback_ = 1;
  std::deque<Entry> to_deliver_;
  std::condition_variable cv_;
  bool thread_started_ = false;
};

}  // namespace rgpu::client
