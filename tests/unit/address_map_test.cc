// The client's address map and the server's allocation table.
#include "client/address_map.h"

#include <gtest/gtest.h>
#include <sys/mman.h>

#include "server/allocation_table.h"

using rgpu::client::AddressMap;
using rgpu::client::DeviceRange;
using rgpu::client::HostRange;

TEST(AddressMap, DeviceRanges) {
  AddressMap m;
  const uint64_t base = 0x300000000000ull;
  m.add_device(DeviceRange{base, 1000, 1});
  int dev = -1;
  EXPECT_TRUE(m.device_range_ok(base, 1000, &dev));
  EXPECT_EQ(dev, 1);
  EXPECT_TRUE(m.device_range_ok(base + 999, 1, nullptr));
  EXPECT_FALSE(m.device_range_ok(base + 999, 2, nullptr));
  EXPECT_FALSE(m.device_range_ok(base - 1, 1, nullptr));
  EXPECT_TRUE(m.find_device(base + 500).has_value());
  EXPECT_FALSE(m.find_device(base + 1000).has_value());
  // The range is reserved in this process: a fixed mapping there is refused.
  void* p = mmap(reinterpret_cast<void*>(base), 4096, PROT_READ,
                 MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE, -1, 0);
  EXPECT_EQ(p, MAP_FAILED);
  EXPECT_TRUE(m.remove_device(base).has_value());
  EXPECT_FALSE(m.remove_device(base).has_value());
  EXPECT_FALSE(m.find_device(base).has_value());
}

TEST(AddressMap, HostRangesDoNotOverlap) {
  AddressMap m;
  EXPECT_TRUE(m.add_host(HostRange{0x1000, 0x1000, 0, true, 0}));
  EXPECT_FALSE(m.add_host(HostRange{0x1800, 0x1000, 0, true, 0}));
  EXPECT_FALSE(m.add_host(HostRange{0x800, 0x1000, 0, true, 0}));
  EXPECT_TRUE(m.add_host(HostRange{0x2000, 0x10, 0, false, 0}));
  EXPECT_TRUE(m.find_host(0x1fff).has_value());
  EXPECT_FALSE(m.find_host(0x2010).has_value());
  EXPECT_TRUE(m.remove_host(0x1000).has_value());
  EXPECT_FALSE(m.find_host(0x1000).has_value());
}

TEST(AllocationTable, Containment) {
  rgpu::server::AllocationTable t;
  t.add(1000, 100);
  t.add(2000, 50);
  EXPECT_TRUE(t.contains(1000, 100));
  EXPECT_TRUE(t.contains(1050, 50));
  EXPECT_FALSE(t.contains(1050, 51));
  EXPECT_FALSE(t.contains(999, 1));
  EXPECT_FALSE(t.contains(1100, 1));
  EXPECT_FALSE(t.contains(1090, UINT64_MAX));
  EXPECT_TRUE(t.is_base(2000));
  EXPECT_FALSE(t.is_base(2001));
  EXPECT_TRUE(t.remove(2000));
  EXPECT_FALSE(t.contains(2000, 1));
}
