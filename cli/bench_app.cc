#include "cli/bench_app.h"

#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace rgpu::cli {

std::string find_train_script(const char* exe_dir) {
  for (const char* rel : {"/../../examples/torch_train.py", "/../examples/torch_train.py",
                          "/../share/rgpu/examples/torch_train.py"}) {
    std::string c = std::string(exe_dir) + rel;
    if (access(c.c_str(), R_OK) == 0) return c;
  }
  return "";
}

std::optional<double> cnn_step_ms(const std::string& script,
                                  const std::vector<std::pair<std::string, std::string>>& env,
                                  int steps) {
  int out[2];
  if (pipe(out) != 0) return std::nullopt;
  pid_t pid = fork();
  if (pid < 0) {
    close(out[0]);
    close(out[1]);
    return std::nullopt;
  }
  if (pid == 0) {
    dup2(out[1], 1);
    close(out[0]);
    close(out[1]);
    for (auto& [k, v] : env) setenv(k.c_str(), v.c_str(), 1);
    std::string n = std::to_string(steps);
    execlp("python3", "python3", script.c_str(), "--model", "cnn", "--steps", n.c_str(),
           static_cast<char*>(nullptr));
    fprintf(stderr, "rgpu bench: cannot run python3: %s\n", strerror(errno));
    _exit(127);
  }
  close(out[1]);
  std::optional<double> ms;
  FILE* f = fdopen(out[0], "r");
  char line[256];
  while (f && fgets(line, sizeof line, f)) {
    double v = 0;
    if (sscanf(line, "step_ms %lf", &v) == 1) ms = v;
  }
  if (f) fclose(f);
  int st = 0;
  waitpid(pid, &st, 0);
  if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) {
    fprintf(stderr, "rgpu bench: the CNN training run failed (status %d)\n", st);
    return std::nullopt;
  }
  return ms;
}

}  // namespace rgpu::cli
