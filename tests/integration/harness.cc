#include "tests/integration/harness.h"

#include <dirent.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <poll.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <fstream>
#include <stdexcept>
#include <thread>

namespace rgpu::test {
namespace {

using Clock = std::chrono::steady_clock;

// rgpud's default peer key (server/peer_vouch.h) lives under $XDG_CONFIG_HOME: a folder of this
// test process's own, so the rgpuds a test starts share one key, made by the first, and nothing
// is written to the user's home.  Set before main(), so every child inherits it.
const std::string kConfigHome = [] {
  char tmpl[] = "/tmp/rgpu-test-config-XXXXXX";
  if (!mkdtemp(tmpl)) throw std::runtime_error("mkdtemp");
  setenv("XDG_CONFIG_HOME", tmpl, 1);
  std::string dir = tmpl;
  atexit([] {
    std::string rm = "rm -rf '" + std::string(getenv("XDG_CONFIG_HOME")) + "'";
    if (system(rm.c_str()) != 0) perror("rm");
  });
  return dir;
}();

// What a child needs, built before fork(): the test process may have threads (a relay, a
// reader) that hold the allocator's or the environment's locks at the moment of the fork, so the
// child itself only calls async-signal-safe functions (dup2, close, execve, _exit).
struct Launch {
  std::vector<std::string> args, envs;
  std::vector<char*> argv, envp;
  // `program`: a CUDA program or tool (in a sanitizer build it gets the sanitizer runtime
  // preloaded); rgpud itself is instrumented and starts with the test's environment as it is.
  Launch(const std::vector<std::string>& a, const Env& extra, bool program = true) : args(a) {
    (void)program;
    Env env;
    for (char** e = environ; *e; ++e) {
      const char* eq = strchr(*e, '=');
      if (eq) env[std::string(*e, static_cast<size_t>(eq - *e))] = eq + 1;
    }
#ifdef RGPU_SANITIZER_PRELOAD
    // A sanitizer build: uninstrumented CUDA programs (started directly, by `rgpu run`, or by
    // `rgpu bench`) load an instrumented runtime, so every child gets the sanitizer runtime
    // first.  Leaks of the test programs themselves are not ours to report.
    if (program) {
      env["LD_PRELOAD"] = RGPU_SANITIZER_PRELOAD;
      env["ASAN_OPTIONS"] = "detect_leaks=0";
    }
#endif
    for (auto& [k, v] : extra) env[k] = v;
#ifdef RGPU_SANITIZER_PRELOAD
    // A test's own preload goes after the sanitizer runtime, which must come first.
    if (auto it = extra.find("LD_PRELOAD"); program && it != extra.end())
      env["LD_PRELOAD"] = std::string(RGPU_SANITIZER_PRELOAD) + ":" + it->second;
#endif
    for (auto& [k, v] : env) envs.push_back(k + "=" + v);
    for (auto& s : args) argv.push_back(const_cast<char*>(s.c_str()));
    argv.push_back(nullptr);
    for (auto& s : envs) envp.push_back(const_cast<char*>(s.c_str()));
    envp.push_back(nullptr);
  }
  // In the child: async-signal-safe calls only.
  [[noreturn]] void exec() const {
    execve(argv[0], argv.data(), envp.data());
    static const char msg[] = "exec failed: ";
    ssize_t n = write(2, msg, sizeof msg - 1);
    n = write(2, argv[0], strlen(argv[0]));
    n = write(2, "\n", 1);
    (void)n;
    _exit(127);
  }
};

std::string read_text(const std::string& path, size_t max = 4096) {
  int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return "";
  std::string s(max, '\0');
  ssize_t n = read(fd, s.data(), max);
  close(fd);
  s.resize(n > 0 ? static_cast<size_t>(n) : 0);
  while (!s.empty() && (s.back() == '\n' || s.back() == '\0')) s.pop_back();
  return s;
}

}  // namespace

std::string describe_process(pid_t pid) {
  const std::string base = "/proc/" + std::to_string(pid);
  char exe[512] = {};
  ssize_t n = readlink((base + "/exe").c_str(), exe, sizeof exe - 1);
  std::string out = "process " + std::to_string(pid) + " (" + (n > 0 ? exe : "exe unknown") + ")";
  DIR* dir = opendir((base + "/task").c_str());
  if (!dir) return out + ": gone";
  while (dirent* e = readdir(dir)) {
    if (e->d_name[0] == '.') continue;
    const std::string t = base + "/task/" + e->d_name;
    std::string stat = read_text(t + "/stat", 512);
    const size_t rp = stat.rfind(')');
    const char state = rp != std::string::npos && rp + 2 < stat.size() ? stat[rp + 2] : '?';
    out += "\n  thread " + std::string(e->d_name) + " " + read_text(t + "/comm", 64) + " state " +
           state + " wchan " + read_text(t + "/wchan", 128) + " syscall " +
           read_text(t + "/syscall", 256);
  }
  closedir(dir);
  return out;
}

namespace {

int decode_status(int st) {
  if (WIFEXITED(st)) return WEXITSTATUS(st);
  if (WIFSIGNALED(st)) return 128 + WTERMSIG(st);
  return -1;
}

}  // namespace

std::string cuda_program(const std::string& name) {
  return std::string(RGPU_CUDA_BIN) + "/" + name;
}

Result run(const std::vector<std::string>& argv, const Env& env, int timeout_s) {
#ifdef RGPU_SANITIZER_PRELOAD
  timeout_s *= 2;  // everything runs instrumented: give a program longer before calling it hung
#endif
  const Launch launch(argv, env);
  int out[2], err[2];
  if (pipe2(out, O_CLOEXEC) || pipe2(err, O_CLOEXEC)) throw std::runtime_error("pipe");
  pid_t pid = fork();
  if (pid == 0) {
    dup2(out[1], 1);  // dup2 clears close-on-exec on the copy
    dup2(err[1], 2);
    launch.exec();
  }
  close(out[1]);
  close(err[1]);
  Result r;
  auto deadline = Clock::now() + std::chrono::seconds(timeout_s);
  pollfd fds[2] = {{out[0], POLLIN, 0}, {err[0], POLLIN, 0}};
  int open_fds = 2;
  bool killed = false;
  while (open_fds > 0) {
    int ms = static_cast<int>(
        std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count());
    if (ms <= 0) {
      // What it was doing, for the failure message: never exec'd, or which threads wait where.
      r.err += "\n[test harness] killed after " + std::to_string(timeout_s) +
               " s: " + describe_process(pid) + "\n";
      kill(pid, SIGKILL);
      killed = true;
      break;
    }
    if (poll(fds, 2, ms) <= 0) continue;
    for (int i = 0; i < 2; ++i) {
      if (fds[i].fd < 0 || !(fds[i].revents & (POLLIN | POLLHUP))) continue;
      char buf[4096];
      ssize_t n = read(fds[i].fd, buf, sizeof buf);
      if (n <= 0) {
        close(fds[i].fd);
        fds[i].fd = -1;
        --open_fds;
      } else {
        (i == 0 ? r.out : r.err).append(buf, static_cast<size_t>(n));
      }
    }
  }
  for (auto& f : fds)
    if (f.fd >= 0) close(f.fd);
  int st = 0;
  waitpid(pid, &st, 0);
  r.status = killed ? 124 : decode_status(st);
  return r;
}

Child spawn(const std::vector<std::string>& argv, const Env& env) {
  const Launch launch(argv, env);
  int out[2];
  if (pipe2(out, O_CLOEXEC)) throw std::runtime_error("pipe");
  pid_t pid = fork();
  if (pid == 0) {
    dup2(out[1], 1);
    launch.exec();
  }
  close(out[1]);
  return Child{pid, out[0]};
}

bool Child::wait_line(const std::string& prefix, int timeout_s, std::string* line) {
  std::string buf;
  auto deadline = Clock::now() + std::chrono::seconds(timeout_s);
  while (Clock::now() < deadline) {
    pollfd p{out_fd, POLLIN, 0};
    if (poll(&p, 1, 100) <= 0) continue;
    char c;
    if (read(out_fd, &c, 1) != 1) return false;
    if (c != '\n') {
      buf += c;
      continue;
    }
    if (buf.rfind(prefix, 0) == 0) {
      if (line) *line = buf;
      return true;
    }
    buf.clear();
  }
  return false;
}

void Child::kill_and_wait(int sig) {
  if (pid > 0) {
    kill(pid, sig);
    waitpid(pid, nullptr, 0);
    pid = -1;
  }
  if (out_fd >= 0) close(out_fd);
  out_fd = -1;
}

Daemon::Daemon(std::vector<std::string> extra) : Daemon(std::move(extra), {}, "") {}

Daemon::Daemon(std::vector<std::string> extra, const Env& more_env, const std::string& log_file,
               int max_fds) {
  char tmpl[] = "/tmp/rgpud-port-XXXXXX";
  int fd = mkstemp(tmpl);
  close(fd);
  unlink(tmpl);
  port_file_ = tmpl;
  char cache[] = "/tmp/rgpud-cache-XXXXXX";
  cache_dir_ = mkdtemp(cache);
  std::vector<std::string> argv = {RGPUD_PATH,    "--listen",       "127.0.0.1:0",
                                   "--port-file", port_file_,       "--module-cache",
                                   cache_dir_,    "--host-kernels", RGPU_HOST_KERNELS};
  bool has_backend = false;
  for (auto& a : extra) has_backend = has_backend || a == "--backend";
  if (!has_backend) argv.insert(argv.end(), {"--backend", "host"});
  argv.insert(argv.end(), extra.begin(), extra.end());
  Env env{{"RGPU_LOG", "warn"}};
  for (const auto& [k, v] : more_env) env[k] = v;
  const Launch launch(argv, env, false);
  pid_ = fork();
  if (pid_ == 0) {
    if (!log_file.empty()) {
      int log = open(log_file.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
      if (log >= 0) dup2(log, 2);
    }
    if (max_fds > 0) {  // a system call, as async-signal-safe as the others here
      const rlimit r{static_cast<rlim_t>(max_fds), static_cast<rlim_t>(max_fds)};
      if (setrlimit(RLIMIT_NOFILE, &r) != 0) _exit(126);
    }
    launch.exec();
  }
  auto deadline = Clock::now() + std::chrono::seconds(20);
  while (Clock::now() < deadline) {
    std::ifstream in(port_file_);
    int p = 0;
    if (in >> p && p > 0) {
      port_ = static_cast<uint16_t>(p);
      return;
    }
    if (!alive()) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  throw std::runtime_error("rgpud did not start");
}

Daemon::~Daemon() {
  if (pid_ > 0) {
    kill(pid_, SIGTERM);
    // rgpud ends its sessions within --shutdown-timeout (5 s) and SIGKILLs the rest; one that
    // does not exit is a failure of the test, never a hung test.
    int st = 0;
    if (!wait_exit(30000, st)) {
      ADD_FAILURE() << "rgpud did not exit within 30 s of SIGTERM: " << describe_process(pid_);
      for (pid_t c : live_children(pid_)) ADD_FAILURE() << "its child " << describe_process(c);
      kill(pid_, SIGKILL);
      waitpid(pid_, nullptr, 0);
    }
  }
  unlink(port_file_.c_str());
  std::string rm = "rm -rf '" + cache_dir_ + "'";
  if (system(rm.c_str()) != 0) perror("rm");
}

bool Daemon::alive() const {
  int st;
  return waitpid(pid_, &st, WNOHANG) == 0;
}

bool Daemon::wait_exit(int timeout_ms, int& status) {
  auto deadline = Clock::now() + std::chrono::milliseconds(timeout_ms);
  do {
    if (waitpid(pid_, &status, WNOHANG) == pid_) {
      pid_ = -1;
      return true;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  } while (Clock::now() < deadline);
  return false;
}

Env Daemon::client_env() const {
  return {{"RGPU_SERVERS", servers()}, {"LD_LIBRARY_PATH", RGPU_LIB_PATH}};
}

std::vector<pid_t> live_children(pid_t parent) {
  std::vector<pid_t> out;
  DIR* dir = opendir("/proc");
  if (!dir) return out;
  while (dirent* e = readdir(dir)) {
    pid_t pid = atoi(e->d_name);
    if (pid <= 0) continue;
    // read(2), not a stream: a process that ends between open and read gives ESRCH.
    int fd = open(("/proc/" + std::string(e->d_name) + "/stat").c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) continue;
    char buf[512];
    ssize_t n = read(fd, buf, sizeof buf - 1);
    close(fd);
    if (n <= 0) continue;
    buf[n] = 0;
    const char* rp = strrchr(buf, ')');
    char state = 0;
    int ppid = 0;
    if (rp && sscanf(rp + 1, " %c %d", &state, &ppid) == 2 && ppid == parent && state != 'Z')
      out.push_back(pid);
  }
  closedir(dir);
  return out;
}

std::string peer_key_file() { return kConfigHome + "/rgpud/peer-key"; }

std::string nvidia_runtime_dir() {
  static std::string dir = [] {
    char tmpl[] = "/tmp/rgpu-nvrt-XXXXXX";
    if (!mkdtemp(tmpl)) throw std::runtime_error("mkdtemp");
    std::string d = tmpl;
    if (symlink(RGPU_NVIDIA_CUDART, (d + "/libcudart.so.13").c_str()) != 0 ||
        symlink(RGPU_LIB_PATH "/libcuda.so.1", (d + "/libcuda.so.1").c_str()) != 0)
      throw std::runtime_error("cannot link NVIDIA's runtime and rgpu's driver into " + d);
    return d;
  }();
  return dir;
}

}  // namespace rgpu::test
