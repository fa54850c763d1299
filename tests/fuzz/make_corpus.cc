// Writes the seed corpus of the fuzz targets (checked in under tests/fuzz/corpus/<target>/):
//   fuzz_make_corpus OUT_DIR FATBIN_DIR
// FATBIN_DIR holds fat binaries nvcc built (build/tests/fatbins: plain_ptx, zstd, lz4_ptx, multi).
// Seeds are valid inputs: frame headers, every catalogue message, a session (handshake and a few
// requests), fat binaries, the cubins and PTX inside them, and small hand-built cubins.
#include <sys/stat.h>

#include <cstdio>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "fatbin/fatbin.h"
#include "proto/auth.h"
#include "proto/frame.h"
#include "tests/unit/image_builder.h"

using namespace rgpu;
using namespace rgpu::proto;

namespace {

std::string out_dir;

void write(const std::string& target, const std::string& name, const std::vector<uint8_t>& b) {
  std::string dir = out_dir + "/" + target;
  mkdir(dir.c_str(), 0755);
  std::ofstream(dir + "/" + name, std::ios::binary)
      .write(reinterpret_cast<const char*>(b.data()), static_cast<std::streamsize>(b.size()));
}

std::vector<uint8_t> read(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::vector<uint8_t>(std::istreambuf_iterator<char>(in), {});
}

std::vector<uint8_t> frame(uint16_t type, const std::vector<uint8_t>& body, uint64_t id,
                           const std::vector<uint8_t>& payload = {}, uint16_t flags = 0) {
  uint8_t raw[kHeaderSize];
  encode_header(FrameHeader{type, flags, static_cast<uint32_t>(body.size()), id, payload.size()},
                raw);
  std::vector<uint8_t> out(raw, raw + kHeaderSize);
  out.insert(out.end(), body.begin(), body.end());
  out.insert(out.end(), payload.begin(), payload.end());
  return out;
}

template <class M>
std::vector<uint8_t> req(const typename M::Req& r, uint64_t id,
                         const std::vector<uint8_t>& payload = {}) {
  return frame(static_cast<uint16_t>(M::id), encode_message(r), id, payload);
}

void append(std::vector<uint8_t>& a, const std::vector<uint8_t>& b) {
  a.insert(a.end(), b.begin(), b.end());
}

// The same order as the checkers of fuzz_messages.cc.
void messages() {
  size_t i = 0;
  auto emit = [&](const std::vector<uint8_t>& body, const std::string& name) {
    std::vector<uint8_t> b = {static_cast<uint8_t>(i), static_cast<uint8_t>(i >> 8)};
    append(b, body);
    write("messages", name, b);
    ++i;
  };
#define RGPU_MSG(NAME, ID, MODE, PAYLOAD)          \
  emit(encode_message(NAME##Req{}), #NAME "_req"); \
  emit(encode_message(NAME##Rep{}), #NAME "_rep"); \
  emit(encode_ok_reply(NAME##Rep{}), #NAME "_reply");
#include "proto/catalogue.def"
#undef RGPU_MSG
  emit(encode_message(AsyncErrorMsg{}), "AsyncError");
  emit(encode_message(AsyncDataMsg{}), "AsyncData");
  emit(encode_message(RunCallbackMsg{}), "RunCallback");
  emit(encode_message(DeviceOutputMsg{}), "DeviceOutput");
  // A few with content.
  HelloReq hello;
  hello.client_info = "seed";
  i = 0;
  emit(encode_message(hello), "Hello_req_info");
}

void frame_headers() {
  auto header = [](FrameHeader h) {
    uint8_t raw[kHeaderSize];
    encode_header(h, raw);
    return std::vector<uint8_t>(raw, raw + kHeaderSize);
  };
  write("frame_header", "hello", header({1, 0, 20, 1, 0}));
  write("frame_header", "reply_payload", header({0x0203, kFlagReply | kFlagTrailer, 4, 9, 4096}));
  write("frame_header", "async_error",
        header({static_cast<uint16_t>(MsgId::AsyncError), 0, 30, 0, 0}));
}

void sessions(const std::vector<uint8_t>& fatbin) {
  std::vector<uint8_t> s = {0};  // no token
  HelloReq hello;
  hello.client_info = "seed";
  append(s, req<HelloMsg>(hello, 1));
  write("handshake", "hello", s);
  append(s, req<PingMsg>(PingReq{}, 2));
  append(s, req<GetDeviceInfoMsg>(DeviceReq{0}, 3));
  append(s, req<MallocMsg>(MallocReq{0, 4096}, 4));
  write("handshake", "hello_malloc", s);
  std::vector<uint8_t> m = s;
  ModuleLoadReq load;
  load.hash = sha256(fatbin.data(), fatbin.size());
  load.image_size = fatbin.size();
  load.functions = {"k"};
  load.variables = {VarName{"g_var", 8}};
  append(m, req<ModuleLoadMsg>(load, 5, fatbin));
  append(m, req<ModuleLookupMsg>(ModuleLookupReq{0, load.hash, {"k"}, {}}, 6));
  append(m, req<DeviceSynchronizeMsg>(DeviceReq{0}, 7));
  write("handshake", "module", m);
  std::vector<uint8_t> t = {1};  // the server has a token
  append(t, req<HelloMsg>(hello, 1));
  append(t, req<AuthMsg>(AuthReq{auth_mac("wrong", Nonce{})}, 2));
  write("handshake", "auth", t);
}

// A hand-built cubin: kernel k(ptr, int), an initialised global g_var and a zeroed one.
std::vector<uint8_t> small_cubin() {
  test::CubinBuilder c = test::basic_cubin();
  uint32_t g = c.name("g_var"), z = c.name("g_zero");
  uint32_t data = c.add({".nv.global.init", 1, std::vector<uint8_t>(16, 7)});
  uint32_t bss = c.add({".nv.global", test::CubinBuilder::kNobits, {}, 64});
  uint32_t strtab = c.add({".strtab", test::CubinBuilder::kStrtab, {}});
  auto sym = test::CubinBuilder::symbol(g, static_cast<uint16_t>(data), 8, 8);
  auto sym2 = test::CubinBuilder::symbol(z, static_cast<uint16_t>(bss), 0, 32);
  append(sym, sym2);
  c.add({".symtab", test::CubinBuilder::kSymtab, sym, UINT64_MAX, UINT64_MAX, strtab, 24});
  c.sections[strtab - 1].data = c.strtab;
  return c.build();
}

// The crafted images an outside tester reported (issue #9), kept as regression seeds.
void regressions() {
  test::CubinBuilder nobits;  // a NOBITS .nv.info section whose offset is far outside the image
  nobits.add({".nv.info.k", test::CubinBuilder::kNobits, {}, 4096, 1ull << 40});
  write("cubin", "regress-nobits-nvinfo", nobits.build());
  write("fatbin", "regress-nobits-nvinfo", test::FatbinBuilder::wrap(nobits.build()));
  test::CubinBuilder huge = test::basic_cubin();  // a __device__ global whose rounding overflows
  uint32_t g = huge.name("g_huge");
  uint32_t home = huge.add({".nv.global", test::CubinBuilder::kNobits, {}, UINT64_MAX});
  uint32_t strtab = huge.add({".strtab", test::CubinBuilder::kStrtab, huge.strtab});
  auto sym = test::CubinBuilder::symbol(g, static_cast<uint16_t>(home), 0, UINT64_MAX - 16);
  huge.add({".symtab", test::CubinBuilder::kSymtab, sym, UINT64_MAX, UINT64_MAX, strtab, 24});
  write("cubin", "regress-huge-global", huge.build());
  test::FatbinBuilder bomb;  // a few hundred bytes declaring a terabyte
  bomb.entries.push_back({2, 90, 0x8000, std::vector<uint8_t>(200, 0x28), 1ull << 40});
  write("fatbin", "regress-declared-terabyte", bomb.build());
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 3) {
    fprintf(stderr, "usage: %s OUT_DIR FATBIN_DIR\n", argv[0]);
    return 2;
  }
  out_dir = argv[1];
  mkdir(out_dir.c_str(), 0755);
  std::string fatbins = argv[2];
  frame_headers();
  messages();
  regressions();
  std::vector<uint8_t> cubin = small_cubin();
  std::vector<uint8_t> small = test::FatbinBuilder::wrap(cubin);
  sessions(small);
  write("cubin", "small", cubin);
  write("fatbin", "small", small);
  write("ptx", "tiny", {});
  std::string ptx =
      ".version 9.0\n.target sm_90\n.address_size 64\n"
      ".visible .entry k(\n\t.param .u64 .ptr .align 8 a,\n\t.param .u32 n,\n"
      "\t.param .align 16 .b8 s[48]\n)\n{\n\tret;\n}\n";
  write("ptx", "entry", std::vector<uint8_t>(ptx.begin(), ptx.end()));
  for (const char* name : {"plain_ptx", "zstd", "lz4_ptx", "multi"}) {
    std::vector<uint8_t> bin = read(fatbins + "/" + name + ".fatbin");
    if (bin.empty()) {
      fprintf(stderr, "%s/%s.fatbin is missing\n", fatbins.c_str(), name);
      return 1;
    }
    if (std::string(name) != "multi") write("fatbin", name, bin);  // multi: 57 KiB, too big
    int n = 0;
    for (const fatbin::Entry& e : fatbin::parse_entries(bin.data(), bin.size())) {
      std::string id = std::string(name) + "_" + std::to_string(n++) + "_" + std::to_string(e.arch);
      if (e.kind == fatbin::EntryKind::Elf && e.data.size() < 32768) write("cubin", id, e.data);
      if (e.kind == fatbin::EntryKind::Ptx && std::string(name) == "plain_ptx")
        write("ptx", id, e.data);
    }
  }
  return 0;
}
