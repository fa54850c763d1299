#include "cli/bench_startup.h"

#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <utility>

namespace rgpu::cli {
namespace {

using Env = std::vector<std::pair<std::string, std::string>>;

struct Run {
  bool ok = false;  // exited 0
  double wall_s = 0;
  std::string out, err;
};

// A whole program (exec to exit) is what start-up costs; none of these takes long, so one that
// hangs is killed rather than holding the bench up.
constexpr int kTimeoutS = 120;

// Runs argv with `env` added, collecting stdout and stderr (read together: the stats on stderr
// can outgrow a pipe while the program still writes to stdout).
Run run_program(const std::vector<std::string>& argv, const Env& env) {
  Run r;
  int out[2], err[2];
  if (pipe(out) != 0) return r;
  if (pipe(err) != 0) {
    close(out[0]);
    close(out[1]);
    return r;
  }
  // Everything the child needs is built before the fork (the bench holds threads: after fork
  // only async-signal-safe calls), and the child leads its own process group, so that a kill
  // reaches what it started too.
  std::vector<std::string> envs;
  for (char** e = environ; *e; ++e) {
    const char* eq = strchr(*e, '=');
    const std::string name = eq ? std::string(*e, static_cast<size_t>(eq - *e)) : std::string(*e);
    bool replaced = false;
    for (auto& [k, v] : env) replaced = replaced || k == name;
    if (!replaced) envs.push_back(*e);
  }
  for (auto& [k, v] : env) envs.push_back(k + "=" + v);
  std::vector<char*> envp, args;
  for (auto& e : envs) envp.push_back(const_cast<char*>(e.c_str()));
  envp.push_back(nullptr);
  for (auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  const auto t0 = std::chrono::steady_clock::now();
  pid_t pid = fork();
  if (pid == 0) {
    setpgid(0, 0);
    dup2(out[1], 1);
    dup2(err[1], 2);
    for (int fd : {out[0], out[1], err[0], err[1]}) close(fd);
    execvpe(args[0], args.data(), envp.data());
    static const char msg[] = "rgpu bench: cannot run a start-up program\n";
    (void)!write(2, msg, sizeof msg - 1);
    _exit(127);
  }
  close(out[1]);
  close(err[1]);
  if (pid < 0) {
    close(out[0]);
    close(err[0]);
    return r;
  }
  pollfd fds[2] = {{out[0], POLLIN, 0}, {err[0], POLLIN, 0}};
  std::string* into[2] = {&r.out, &r.err};
  int open_fds = 2;
  bool killed = false;
  while (open_fds > 0) {
    const double left =
        kTimeoutS - std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    if (left <= 0 && !killed) {
      kill(-pid, SIGKILL);
      kill(pid, SIGKILL);
      killed = true;
      r.err += "rgpu bench: killed after " + std::to_string(kTimeoutS) + " s\n";
    }
    if (killed && left < -5) break;  // something outside the group holds the pipes: stop reading
    if (poll(fds, 2, left > 0 ? static_cast<int>(left * 1000) + 1 : 1000) < 0 && errno != EINTR) {
      kill(-pid, SIGKILL);
      kill(pid, SIGKILL);
      break;
    }
    for (int i = 0; i < 2; ++i) {
      if (fds[i].fd < 0 || !(fds[i].revents & (POLLIN | POLLHUP | POLLERR))) continue;
      char buf[4096];
      const ssize_t n = read(fds[i].fd, buf, sizeof buf);
      if (n > 0) {
        into[i]->append(buf, static_cast<size_t>(n));
      } else if (n == 0 || errno != EINTR) {
        close(fds[i].fd);
        fds[i].fd = -1;
        --open_fds;
      }
    }
  }
  for (auto& f : fds)
    if (f.fd >= 0) close(f.fd);
  int st = 0;
  waitpid(pid, &st, 0);
  r.wall_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  r.ok = WIFEXITED(st) && WEXITSTATUS(st) == 0;
  return r;
}

// The value after `key ` on a line of `text`.
std::optional<double> field(const std::string& text, const std::string& key) {
  for (size_t at = 0; (at = text.find(key + " ", at)) != std::string::npos; at += key.size()) {
    if (at != 0 && text[at - 1] != '\n') continue;
    return strtod(text.c_str() + at + key.size() + 1, nullptr);
  }
  return std::nullopt;
}

// Round trips of the run, from RGPU_STATS's summary (client/link_stats.cc), summed over the
// summaries printed (one per rgpu library in the process that made calls).
std::optional<long> round_trips(const std::string& err) {
  const std::string key = "rgpu stats: images shipped ";
  std::optional<long> total;
  for (size_t at = 0; (at = err.find(key, at)) != std::string::npos; at += key.size()) {
    const size_t rt = err.find("round trips ", at);
    if (rt == std::string::npos || err.find('\n', at) < rt) continue;
    total = total.value_or(0) + strtol(err.c_str() + rt + 12, nullptr, 10);
  }
  return total;
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

// The program's last word on stderr (RGPU_STATS's summary, printed at exit, left aside).
std::string last_line(const std::string& err) {
  std::string last;
  size_t at = 0;
  while (at < err.size()) {
    size_t nl = err.find('\n', at);
    if (nl == std::string::npos) nl = err.size();
    std::string line = err.substr(at, nl - at);
    if (!line.empty() && line.rfind("rgpu stats:", 0) != 0) last = line;
    at = nl + 1;
  }
  return last;
}

std::string find_program(const char* exe_dir, const std::string& name) {
  for (const char* rel : {"/../bench/", "/", "/../libexec/"}) {
    std::string c = std::string(exe_dir) + rel + name;
    if (access(c.c_str(), X_OK) == 0) return c;
  }
  return "";
}

struct Target {
  std::string mode, transport;
  Env env;
  std::string label() const { return transport.empty() ? mode : mode + " " + transport; }
};

// Each environment's start-up rows: the median of 3 fresh processes' wall time.
constexpr int kStartupRuns = 3;
// The two loop lengths whose difference gives round trips per iteration without start-up's.
constexpr int kShortLoop = 200, kLongLoop = 1200;
// PyTorch's first tensor above this many seconds is measured once (three would be too long).
constexpr double kSlowTorchS = 4;

class Bench {
 public:
  Bench(const char* exe_dir, const char* lib_dir, bool native,
        const std::vector<std::string>& transports)
      : exe_dir_(exe_dir) {
    if (native) {
      const char* root = getenv("RGPU_CUDA_ROOT");
      native_lib_ = std::string(root ? root : "/usr/local/cuda") + "/lib64";
      targets_.push_back({"native", "", {{"LD_LIBRARY_PATH", native_lib_}}});
    }
    for (const std::string& t : transports)
      targets_.push_back(
          {"rgpu", t, {{"LD_LIBRARY_PATH", lib_dir}, {"RGPU_TRANSPORT", t}, {"RGPU_TLS", "0"}}});
  }

  StartupRun run() {
    first_sgemm();
    torch_first_tensor();
    loop("loop_small", "rgpu-bench-loop-small", false);
    loop("loop_thrust", "rgpu-bench-loop-thrust", true);
    return std::move(result_);
  }

 private:
  void add(const std::string& op, const Target& t, double v, const std::string& unit) {
    result_.rows.push_back({op, t.mode, v, unit, t.transport});
  }
  void fail(const std::string& what, const Run& r) {
    fprintf(stderr, "rgpu bench: %s failed: %s\n", what.c_str(), last_line(r.err).c_str());
    result_.notes.push_back(what + ": FAILED (" + last_line(r.err) + ")");
    result_.ok = false;
  }

  void first_sgemm() {
    const std::string prog = find_program(exe_dir_, "rgpu-bench-first-sgemm");
    if (prog.empty()) {
      result_.notes.push_back("first SGEMM: skipped, rgpu-bench-first-sgemm is not installed");
      return;
    }
    bool not_run = false;
    for (const Target& t : targets_) {
      fprintf(stderr, "rgpu bench: first SGEMM of a fresh process, %s...\n", t.label().c_str());
      std::vector<double> wall, in_main;
      for (int i = 0; i < kStartupRuns; ++i) {
        Run r = run_program({prog}, t.env);
        auto m = field(r.out, "first_sgemm_main_s");
        if (!r.ok || !m) return fail("first SGEMM (" + t.label() + ")", r);
        not_run = not_run || field(r.out, "first_sgemm_ran").value_or(0) == 0;
        wall.push_back(r.wall_s);
        in_main.push_back(*m);
      }
      add("first_sgemm", t, median(wall), "s");
      add("first_sgemm_main", t, median(in_main), "s");
    }
    if (not_run)
      result_.notes.push_back(
          "first SGEMM: the server could not run cuBLAS's kernel (cudaErrorNotSupported: rgpud's "
          "host backend), so its time ends at the failed synchronization");
  }

  void torch_first_tensor() {
    if (system("python3 -c 'import torch' >/dev/null 2>&1") != 0) {
      result_.notes.push_back("torch first tensor: skipped, python3 cannot import torch");
      return;
    }
    const std::vector<std::string> argv = {
        "python3", "-c", "import torch; torch.ones(1, device='cuda'); torch.cuda.synchronize()"};
    for (const Target& t : targets_) {
      fprintf(stderr, "rgpu bench: PyTorch's first tensor, %s...\n", t.label().c_str());
      // PyTorch finds NVIDIA's libraries itself (as for the CNN row); rgpu's come first.
      Env env = t.env;
      if (t.mode == "native") env.clear();
      std::vector<double> wall;
      for (int i = 0; i < kStartupRuns; ++i) {
        Run r = run_program(argv, env);
        if (!r.ok) {
          // As the CNN row: PyTorch's own trouble is a note, not a failed bench.
          result_.notes.push_back("torch first tensor (" + t.label() +
                                  "): failed: " + last_line(r.err));
          wall.clear();
          break;
        }
        wall.push_back(r.wall_s);
        // A slow first process (PyTorch through rgpu over a slow link) is taken alone, so that
        // these rows stay short: the note says so.
        if (i == 0 && r.wall_s > kSlowTorchS) {
          result_.notes.push_back("torch first tensor (" + t.label() + "): one run (over " +
                                  std::to_string(static_cast<int>(kSlowTorchS)) + " s)");
          break;
        }
      }
      if (!wall.empty()) add("torch_first_tensor", t, median(wall), "s");
    }
  }

  // us/iter of the long loop in each environment; through rgpu, round trips per iteration from
  // RGPU_STATS's counts of two loop lengths: (R_long - R_short) / (n_long - n_short), so that
  // start-up's round trips (context, module, the untimed warm-up steps) cancel.
  void loop(const std::string& op, const std::string& name, bool thrust) {
    const std::string prog = find_program(exe_dir_, name);
    if (prog.empty()) {
      result_.notes.push_back(op + ": skipped, " + name + " is not installed");
      return;
    }
    for (const Target& t : targets_) {
      fprintf(stderr, "rgpu bench: %s, %s...\n", op.c_str(), t.label().c_str());
      const bool rgpu = t.mode == "rgpu";
      Env env = t.env;
      if (rgpu) env.push_back({"RGPU_STATS", "1"});
      std::optional<long> r_short;
      if (rgpu) {
        Run s = run_program({prog, std::to_string(kShortLoop)}, env);
        if (!s.ok) {
          if (thrust && skip_thrust(t, s)) return;
          return fail(op + " (" + t.label() + ")", s);
        }
        r_short = round_trips(s.err);
      }
      Run l = run_program({prog, std::to_string(kLongLoop)}, env);
      auto us = field(l.out, "loop_us");
      if (!l.ok || !us) {
        if (thrust && rgpu && skip_thrust(t, l)) return;
        return fail(op + " (" + t.label() + ")", l);
      }
      add(op, t, *us, "us/iter");
      if (!rgpu) continue;
      const std::optional<long> r_long = round_trips(l.err);
      if (!r_short || !r_long) {
        result_.notes.push_back(op + " (" + t.label() + "): no RGPU_STATS summary on stderr");
        result_.ok = false;
        continue;
      }
      add(op, t, static_cast<double>(*r_long - *r_short) / (kLongLoop - kShortLoop), "rt/iter");
    }
  }

  // Thrust's kernels have no host implementation: on rgpud's host backend (CI) the loop cannot
  // run through rgpu, which is a note; anywhere else its failure is the bench's.
  bool skip_thrust(const Target& t, const Run& r) {
    if (r.err.find("host backend has no host implementation") == std::string::npos) return false;
    result_.notes.push_back(
        "loop_thrust: skipped through rgpu, the server's host backend cannot "
        "run Thrust's kernels (" +
        t.label() + ": no host implementation)");
    return true;
  }

  const char* exe_dir_;
  std::string native_lib_;
  std::vector<Target> targets_;
  StartupRun result_;
};

}  // namespace

StartupRun bench_startup(const char* exe_dir, const char* lib_dir, bool native,
                         const std::vector<std::string>& transports) {
  return Bench(exe_dir, lib_dir, native, transports).run();
}

void print_startup_rows(const StartupRun& run) {
  printf("\nstart-up (fresh processes, median of %d) and small-call loops (%d iterations):\n",
         kStartupRuns, kLongLoop);
  printf("%-24s %12s %12s %12s %8s %8s\n", "operation", "native", "rgpu tcp", "rgpu shm", "tcp/nat",
         "shm/nat");
  auto cell = [](const StartupRow* r) -> std::string {
    if (!r) return "-";
    char s[32];
    snprintf(s, sizeof s, r->unit == "s" ? "%.3f %s" : "%.3g %s", r->value, r->unit.c_str());
    return s;
  };
  auto ratio = [](const StartupRow* a, const StartupRow* b) -> std::string {
    if (!a || !b || b->value == 0) return "-";
    char s[16];
    snprintf(s, sizeof s, "%.2f", a->value / b->value);
    return s;
  };
  auto row = [&](const char* label, const std::string& op, const std::string& unit) {
    const StartupRow* n = find_row(run, op, "native", "", unit);
    const StartupRow* t = find_row(run, op, "rgpu", "tcp", unit);
    const StartupRow* m = find_row(run, op, "rgpu", "shm", unit);
    if (!n && !t && !m) return;
    printf("%-24s %12s %12s %12s %8s %8s\n", label, cell(n).c_str(), cell(t).c_str(),
           cell(m).c_str(), ratio(t, n).c_str(), ratio(m, n).c_str());
  };
  row("first SGEMM (exec..exit)", "first_sgemm", "s");
  row("  of which from main()", "first_sgemm_main", "s");
  row("torch first tensor", "torch_first_tensor", "s");
  row("loop_small", "loop_small", "us/iter");
  row("  round trips", "loop_small", "rt/iter");
  row("loop_thrust", "loop_thrust", "us/iter");
  row("  round trips", "loop_thrust", "rt/iter");
  for (auto& n : run.notes) printf("note: %s\n", n.c_str());
}

const StartupRow* find_row(const StartupRun& run, const std::string& op, const std::string& mode,
                           const std::string& transport, const std::string& unit) {
  for (auto& r : run.rows)
    if (r.op == op && r.mode == mode && r.transport == transport && r.unit == unit) return &r;
  return nullptr;
}

}  // namespace rgpu::cli
