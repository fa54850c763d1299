#include "frontend/cuda/export_tables.h"

#include <cstdio>
#include <mutex>
#include <set>
#include <string>

#include "common/log.h"

namespace rgpu::cuda_fe {

namespace {

std::string uuid_text(const unsigned char id[16]) {
  std::string s;
  char b[3];
  for (int i = 0; i < 16; ++i) {
    std::snprintf(b, sizeof b, "%02x", id[i]);
    s += b;
    if (i % 4 == 3 && i != 15) s += ' ';
  }
  return s;
}

}  // namespace

const void* find_export_table(const unsigned char id[16]) {
  static std::mutex mu;
  static std::set<std::string> logged;
  std::string text = uuid_text(id);
  std::lock_guard<std::mutex> lock(mu);
  if (logged.insert(text).second)
    LOG_WARN("cuGetExportTable: table %s is not provided by rgpu (CUDA_ERROR_NOT_FOUND)", text.c_str());
  return nullptr;
}

}  // namespace rgpu::cuda_fe
