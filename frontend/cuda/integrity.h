// The answer to NVIDIA's runtime's integrity check (the INTEGRITY_CHECK export table, slot 1;
// shared/reference/cuda-abi.md section 5.3). For check versions ending in 0 and 1 the answer is a
// constant; for those ending in 2 it is HMAC-MD2 (RFC 2104 over RFC 1319's MD2, whose block size
// is 16 bytes) under a fixed 16-byte key, over a 48-byte record of the process and the tables
// followed by 28 bytes per device.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <string_view>
#include <vector>

namespace rgpu::cuda_fe {

// MD2 (RFC 1319), fed byte by byte.
class Md2 {
 public:
  void update(const void* data, size_t n);
  std::array<uint8_t, 16> finish();  // pads, appends the checksum; the object is spent

 private:
  void transform();
  uint8_t x_[48] = {};    // state (0..15), block (16..31), state ^ block (32..47)
  uint8_t sum_[16] = {};  // checksum
  uint8_t count_ = 0;     // bytes of the current block
  uint8_t last_ = 0;      // the checksum's running byte
};

std::array<uint8_t, 16> hmac_md2(const uint8_t key[16], const void* message, size_t n);

struct IntegrityDevice {
  uint8_t uuid[16];
  int32_t pci_domain, pci_bus, pci_device;
};

struct IntegrityInput {
  uint32_t driver_version;  // what cuDriverGetVersion answers
  uint32_t check_version;   // the runtime's argument (13000, 13001, 13002 for CUDA 13.0)
  uint32_t pid;
  uint32_t thread;              // (uint32_t)pthread_self()
  const void* cudart_table;     // the CUDART_INTERFACE table's address
  const void* integrity_table;  // the INTEGRITY_CHECK table's address
  const void* check_function;   // the address of INTEGRITY_CHECK slot 1
  uint64_t unix_seconds;        // the runtime's argument
  std::vector<IntegrityDevice> devices;
};

// The two 64-bit words the runtime expects back.
std::array<uint64_t, 2> integrity_answer(const IntegrityInput& in);

}  // namespace rgpu::cuda_fe
