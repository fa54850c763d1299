// A small fuzzing driver for compilers without libFuzzer: runs LLVMFuzzerTestOneInput on every
// corpus file, then on seeded mutations of them (bit flips, byte values, interesting integers,
// insertions, deletions, splices) until the time or run limit.  Accepts libFuzzer's spelling:
//   fuzz_X [-max_total_time=S] [-runs=N] [-seed=N] [-max_len=N] DIR|FILE...
// A crash (a sanitizer report, abort, a fault) leaves the input in ./crash-<target>-<pid> first.
#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iterator>
#include <random>
#include <string>
#include <vector>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);
extern "C" void __sanitizer_set_death_callback(void (*)(void)) __attribute__((weak));

namespace {

const uint8_t* g_data = nullptr;
size_t g_size = 0;
char g_crash_path[256] = "crash-input";

void save_crash() {
  int fd = open(g_crash_path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
  if (fd >= 0) {
    if (g_size) (void)!write(fd, g_data, g_size);
    close(fd);
  }
  const char msg[] = "fuzz driver: crashing input saved\n";
  (void)!write(2, msg, sizeof msg - 1);
}

void on_signal(int sig) {
  save_crash();
  signal(sig, SIG_DFL);
  raise(sig);
}

void add_path(const std::string& p, std::vector<std::vector<uint8_t>>& corpus) {
  struct stat st;
  if (stat(p.c_str(), &st) != 0) return;
  if (S_ISDIR(st.st_mode)) {
    if (DIR* d = opendir(p.c_str())) {
      while (dirent* e = readdir(d))
        if (e->d_name[0] != '.') add_path(p + "/" + e->d_name, corpus);
      closedir(d);
    }
    return;
  }
  std::ifstream in(p, std::ios::binary);
  corpus.emplace_back(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

void mutate(std::vector<uint8_t>& v, const std::vector<std::vector<uint8_t>>& corpus,
            std::mt19937_64& rng, size_t max_len) {
  static const uint64_t kInteresting[] = {0,          1,          0x7f,       0x80,
                                          0xff,       0x7fff,     0xffff,     0x7fffffff,
                                          0xffffffff, 1ull << 32, 1ull << 40, UINT64_MAX};
  int rounds = 1 + rng() % 4;
  for (int r = 0; r < rounds; ++r) {
    switch (rng() % 7) {
      case 0:  // flip a bit
        if (!v.empty()) v[rng() % v.size()] ^= static_cast<uint8_t>(1u << (rng() % 8));
        break;
      case 1:  // random byte
        if (!v.empty()) v[rng() % v.size()] = static_cast<uint8_t>(rng());
        break;
      case 2: {  // interesting integer of 1, 2, 4 or 8 bytes
        size_t w = size_t{1} << (rng() % 4);
        if (v.size() < w) break;
        uint64_t x = kInteresting[rng() % (sizeof kInteresting / sizeof *kInteresting)];
        if (rng() & 1) x -= rng() % 3;
        memcpy(v.data() + rng() % (v.size() - w + 1), &x, w);
        break;
      }
      case 3: {  // insert bytes
        size_t at = v.empty() ? 0 : rng() % (v.size() + 1);
        v.insert(v.begin() + static_cast<long>(at), 1 + rng() % 16, static_cast<uint8_t>(rng()));
        break;
      }
      case 4: {  // erase bytes
        if (v.empty()) break;
        size_t at = rng() % v.size(), n = std::min<size_t>(1 + rng() % 16, v.size() - at);
        v.erase(v.begin() + static_cast<long>(at), v.begin() + static_cast<long>(at + n));
        break;
      }
      case 5: {  // splice a piece of another input
        const auto& o = corpus[rng() % corpus.size()];
        if (o.empty() || v.empty()) break;
        size_t from = rng() % o.size(), n = std::min<size_t>(1 + rng() % 64, o.size() - from);
        size_t at = rng() % v.size();
        for (size_t i = 0; i < n && at + i < v.size(); ++i) v[at + i] = o[from + i];
        break;
      }
      case 6:  // truncate
        if (!v.empty()) v.resize(rng() % v.size());
        break;
    }
  }
  if (v.size() > max_len) v.resize(max_len);
}

}  // namespace

int main(int argc, char** argv) {
  double seconds = 0;
  uint64_t runs = 0, seed = 1;
  size_t max_len = 1 << 20;
  std::vector<std::vector<uint8_t>> corpus;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a.rfind("-max_total_time=", 0) == 0)
      seconds = atof(a.c_str() + 16);
    else if (a.rfind("-runs=", 0) == 0)
      runs = strtoull(a.c_str() + 6, nullptr, 10);
    else if (a.rfind("-seed=", 0) == 0)
      seed = strtoull(a.c_str() + 6, nullptr, 10);
    else if (a.rfind("-max_len=", 0) == 0)
      max_len = strtoull(a.c_str() + 9, nullptr, 10);
    else if (a[0] == '-')
      continue;  // other libFuzzer options do not apply
    else
      add_path(a, corpus);
  }
  const char* base = strrchr(argv[0], '/');
  snprintf(g_crash_path, sizeof g_crash_path, "crash-%s-%d", base ? base + 1 : argv[0],
           static_cast<int>(getpid()));
  for (int sig : {SIGABRT, SIGSEGV, SIGBUS, SIGFPE, SIGILL}) signal(sig, on_signal);
  if (__sanitizer_set_death_callback) __sanitizer_set_death_callback(save_crash);
  if (corpus.empty()) corpus.emplace_back();

  uint64_t done = 0;
  for (const auto& c : corpus) {  // every seed as it is
    g_data = c.data(), g_size = c.size();
    LLVMFuzzerTestOneInput(c.data(), c.size());
    ++done;
  }
  if (seconds <= 0 && runs == 0) {
    printf("fuzz driver: ran %llu inputs\n", static_cast<unsigned long long>(done));
    return 0;
  }
  std::mt19937_64 rng(seed);
  auto start = std::chrono::steady_clock::now();
  std::vector<uint8_t> input;
  while (true) {
    if (runs && done >= runs) break;
    if (seconds > 0 && (done & 63) == 0 &&
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count() >= seconds)
      break;
    input = corpus[rng() % corpus.size()];
    mutate(input, corpus, rng, max_len);
    g_data = input.data(), g_size = input.size();
    LLVMFuzzerTestOneInput(input.data(), input.size());
    ++done;
  }
  double t = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  printf("fuzz driver: %llu executions in %.1f s (%.0f/s), no crash\n",
         static_cast<unsigned long long>(done), t, t > 0 ? done / t : 0.0);
  return 0;
}
