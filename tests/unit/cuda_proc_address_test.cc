// cuGetProcAddress of rgpu's libcuda.so.1 (loaded with dlopen, as NVIDIA's runtime loads it):
// every (name, version, flags) NVIDIA's runtime 13 asks for (tests/data/libcudart13-driver-
// entrypoints.txt) is answered, each ABI variant chosen by version as cudaTypedefs.h maps them,
// per-thread-default-stream variants for flag 2, unknown names and too-new versions.
#include <dlfcn.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <fstream>
#include <sstream>
#include <string>

namespace {

using GetProc = int (*)(const char*, void**, int, uint64_t, int*);
using GetProcV1 = int (*)(const char*, void**, int, uint64_t);

class ProcAddress : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    lib_ = dlopen(RGPU_LIBCUDA, RTLD_NOW | RTLD_LOCAL);
    ASSERT_NE(lib_, nullptr) << dlerror();
    get_ = reinterpret_cast<GetProc>(dlsym(lib_, "cuGetProcAddress_v2"));
    ASSERT_NE(get_, nullptr);
  }
  // The address cuGetProcAddress gives, or nullptr; `status` its query result.
  void* proc(const char* name, int version, uint64_t flags, int* status = nullptr,
             int* rc = nullptr) {
    void* p = reinterpret_cast<void*>(1);
    int st = -1;
    int r = get_(name, &p, version, flags, &st);
    if (status) *status = st;
    if (rc) *rc = r;
    return p;
  }
  void* sym(const char* name) { return dlsym(lib_, name); }
  static void* lib_;
  static GetProc get_;
};
void* ProcAddress::lib_ = nullptr;
GetProc ProcAddress::get_ = nullptr;

TEST_F(ProcAddress, VariantByVersion) {
  EXPECT_EQ(proc("cuMemAlloc", 2000, 0), sym("cuMemAlloc"));
  EXPECT_EQ(proc("cuMemAlloc", 3020, 0), sym("cuMemAlloc_v2"));
  EXPECT_EQ(proc("cuMemAlloc", 13000, 0), sym("cuMemAlloc_v2"));
  EXPECT_EQ(proc("cuCtxCreate", 3020, 0), sym("cuCtxCreate_v2"));
  EXPECT_EQ(proc("cuCtxCreate", 11040, 0), sym("cuCtxCreate_v3"));
  EXPECT_EQ(proc("cuCtxCreate", 12050, 0), sym("cuCtxCreate_v4"));
  EXPECT_EQ(proc("cuCtxCreate", 12049, 0), sym("cuCtxCreate_v3"));
  EXPECT_EQ(proc("cuCtxSynchronize", 2000, 0), sym("cuCtxSynchronize"));
  EXPECT_EQ(proc("cuCtxSynchronize", 13000, 0), sym("cuCtxSynchronize_v2"));
  EXPECT_EQ(proc("cuGetProcAddress", 11030, 0), sym("cuGetProcAddress"));
  EXPECT_EQ(proc("cuGetProcAddress", 12000, 0), sym("cuGetProcAddress_v2"));
  EXPECT_EQ(proc("cuStreamGetCaptureInfo", 11030, 0), sym("cuStreamGetCaptureInfo_v2"));
}

TEST_F(ProcAddress, PerThreadDefaultStreamVariants) {
  EXPECT_EQ(proc("cuLaunchKernel", 7000, 2), sym("cuLaunchKernel_ptsz"));
  EXPECT_EQ(proc("cuLaunchKernel", 7000, 0), sym("cuLaunchKernel"));
  EXPECT_EQ(proc("cuMemcpyHtoD", 7000, 2), sym("cuMemcpyHtoD_v2_ptds"));
  EXPECT_EQ(proc("cuMemcpyHtoD", 7000, 1), sym("cuMemcpyHtoD_v2"));
  EXPECT_EQ(proc("cuStreamSynchronize", 7000, 2), sym("cuStreamSynchronize_ptsz"));
  // A name without a per-thread variant answers its ordinary one.
  EXPECT_EQ(proc("cuMemAlloc", 3020, 2), sym("cuMemAlloc_v2"));
}

TEST_F(ProcAddress, UnknownNamesAndVersions) {
  int status = -1, rc = -1;
  EXPECT_EQ(proc("cuNoSuchEntryPoint", 12000, 0, &status, &rc), nullptr);
  EXPECT_EQ(rc, 0);      // CUDA_SUCCESS
  EXPECT_EQ(status, 1);  // CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND
  EXPECT_EQ(proc("cuCtxCreate", 1000, 0, &status, &rc), nullptr);
  EXPECT_EQ(rc, 0);
  EXPECT_EQ(status, 2);  // CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT
  EXPECT_EQ(proc("cuMemAlloc", 13010, 0, &status, &rc), nullptr);
  EXPECT_EQ(rc, 1);  // CUDA_ERROR_INVALID_VALUE: newer than this driver
  auto v1 = reinterpret_cast<GetProcV1>(sym("cuGetProcAddress"));
  void* p = nullptr;
  ASSERT_NE(v1, nullptr);
  EXPECT_EQ(v1("cuInit", &p, 2000, 0), 0);
  EXPECT_EQ(p, sym("cuInit"));
}

// Every request NVIDIA's runtime 13 makes gets a function, and for flag 2 the per-thread one
// where the library exports one.
TEST_F(ProcAddress, EveryRuntimeRequestAnswered) {
  std::ifstream f(RGPU_ENTRYPOINTS);
  ASSERT_TRUE(f) << RGPU_ENTRYPOINTS;
  std::string line;
  int requests = 0;
  while (std::getline(f, line)) {
    if (line.empty() || line[0] == '#') continue;
    std::istringstream in(line);
    std::string name;
    int version = 0;
    std::string flags;
    in >> name >> version >> flags;
    const uint64_t fl = std::stoull(flags, nullptr, 0);
    int status = -1, rc = -1;
    void* p = proc(name.c_str(), version, fl, &status, &rc);
    EXPECT_EQ(rc, 0) << line;
    ++requests;
    if (!sym(name.c_str()) && !sym((name + "_v2").c_str())) {
      // Graphics interop (GL, EGL, VDPAU) that the toolkit's stub library does not export: by
      // design a remote GPU has none, and the runtime takes NULL for "absent".
      EXPECT_EQ(p, nullptr) << line;
      EXPECT_EQ(status, 1) << line;
      continue;
    }
    EXPECT_NE(p, nullptr) << line;
    EXPECT_EQ(status, 0) << line;
    if (fl == 2) {
      Dl_info info{};
      ASSERT_NE(dladdr(p, &info), 0) << line;
      const std::string got = info.dli_sname ? info.dli_sname : "";
      const bool has_pt =
          got.find("_ptsz") != std::string::npos || got.find("_ptds") != std::string::npos;
      // The exported per-thread variants of this name, if any.
      bool exported_pt = false;
      for (const char* suffix : {"_ptsz", "_ptds", "_v2_ptsz", "_v2_ptds", "_v3_ptsz"})
        exported_pt = exported_pt || sym((name + suffix).c_str()) != nullptr;
      EXPECT_EQ(has_pt, exported_pt) << line << " answered " << got;
    }
  }
  EXPECT_GT(requests, 400);
}

// An export rgpu does not implement answers CUDA_ERROR_NOT_SUPPORTED (and logs its name once); an
// unknown export table is CUDA_ERROR_NOT_FOUND.
TEST_F(ProcAddress, StubsAndExportTables) {
  using Fn = int (*)(void*);
  auto stub = reinterpret_cast<Fn>(proc("cuGraphicsUnregisterResource", 3000, 0));
  ASSERT_NE(stub, nullptr);
  EXPECT_EQ(stub(nullptr), 801);  // CUDA_ERROR_NOT_SUPPORTED
  using GetTable = int (*)(const void**, const unsigned char*);
  auto table = reinterpret_cast<GetTable>(sym("cuGetExportTable"));
  ASSERT_NE(table, nullptr);
  const unsigned char id[16] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16};
  const void* t = reinterpret_cast<const void*>(1);
  EXPECT_EQ(table(&t, id), 500);  // CUDA_ERROR_NOT_FOUND
  EXPECT_EQ(t, nullptr);
}

}  // namespace
