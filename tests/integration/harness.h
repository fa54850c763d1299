// Process helpers for the integration tests: a local rgpud on loopback, and CUDA programs run
// against rgpu's libcudart.so.13 with their output captured.
#pragma once

#include <sys/types.h>

#include <map>
#include <string>
#include <utility>
#include <vector>

namespace rgpu::test {

struct Result {
  int status = -1;  // exit code, or 128 + signal
  std::string out, err;
};

using Env = std::map<std::string, std::string>;

// Runs `argv` with extra environment variables; kills it after `timeout_s`.
Result run(const std::vector<std::string>& argv, const Env& env = {}, int timeout_s = 120);

// A started child whose stdout can be read line by line.
// Killed (SIGKILL) when it goes out of scope, so that a failed assertion leaves no process behind
// holding the test's output open.
struct Child {
  pid_t pid = -1;
  int out_fd = -1;
  Child(pid_t p, int fd) : pid(p), out_fd(fd) {}
  Child(Child&& o) noexcept : pid(std::exchange(o.pid, -1)), out_fd(std::exchange(o.out_fd, -1)) {}
  Child(const Child&) = delete;
  Child& operator=(const Child&) = delete;
  ~Child() { kill_and_wait(9); }
  // Reads stdout until a line starting with `prefix`; false on EOF or timeout.
  bool wait_line(const std::string& prefix, int timeout_s, std::string* line = nullptr);
  void kill_and_wait(int sig);
};
Child spawn(const std::vector<std::string>& argv, const Env& env);

class Daemon {
 public:
  // Starts rgpud on 127.0.0.1 with a free port, the test kernel plugin and its own module cache,
  // and waits until it listens.
  explicit Daemon(std::vector<std::string> extra_args = {});
  // With more environment (over RGPU_LOG=warn), its log (stderr) going to `log_file`, and when
  // `max_fds` > 0 under a descriptor limit of that many (soft and hard: ulimit -n).
  Daemon(std::vector<std::string> extra_args, const Env& env, const std::string& log_file,
         int max_fds = 0);
  ~Daemon();
  uint16_t port() const { return port_; }
  std::string servers() const { return "127.0.0.1:" + std::to_string(port_); }
  pid_t pid() const { return pid_; }
  bool alive() const;
  // Waits up to `timeout_ms` for rgpud to exit; true (with its wait status) when it did.
  bool wait_exit(int timeout_ms, int& status);
  // Environment for a CUDA program that should use this daemon.
  Env client_env() const;

 private:
  pid_t pid_ = -1;
  uint16_t port_ = 0;
  std::string port_file_;
  std::string cache_dir_;
};

std::string cuda_program(const std::string& name);
// The peer key file the rgpuds of this test process share (rgpud's default, made by the first
// one to start: server/peer_vouch.h).
std::string peer_key_file();
// A folder with NVIDIA's runtime (the toolkit's libcudart.so.13) and rgpu's driver, and nothing
// else: put first on LD_LIBRARY_PATH, programs run NVIDIA's runtime on rgpu's libcuda.so.1.
std::string nvidia_runtime_dir();

// Live (not zombie) child processes of `parent`, e.g. rgpud's session processes. Processes that
// end while /proc is read are skipped, never an error.
std::vector<pid_t> live_children(pid_t parent);

// For a failure message: what `pid` runs and, per thread, its state, kernel wait channel and
// system call (from /proc) — enough to tell a child that never reached exec from a hung program.
std::string describe_process(pid_t pid);

}  // namespace rgpu::test
