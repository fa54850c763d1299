// The client's address map and the server's allocation table.
#include "client/address_map.h"

#include <gtest/gtest.h>
#include <sys/mman.h>

#include "client/config.h"
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

TEST(AddressMap, DeviceRangesDoNotOverlap) {
  AddressMap m;
  const uint64_t base = 0x310000000000ull;
  EXPECT_TRUE(m.add_device(DeviceRange{base, 0x1000, 0}));
  // Device/device: another device's range overlapping (either end, inside, around) is refused.
  EXPECT_FALSE(m.add_device(DeviceRange{base + 0x800, 0x1000, 1}));
  EXPECT_FALSE(m.add_device(DeviceRange{base - 0x800, 0x1000, 1}));
  EXPECT_FALSE(m.add_device(DeviceRange{base + 0x10, 0x10, 1}));
  EXPECT_FALSE(m.add_device(DeviceRange{base - 0x10, 0x2000, 1}));
  EXPECT_FALSE(m.add_device(DeviceRange{base, 0x1000, 1}));
  EXPECT_FALSE(m.add_device(DeviceRange{UINT64_MAX - 4, 16, 1}));  // wraps around
  // Nothing was corrupted: the first range is intact and still device 0's.
  int dev = -1;
  EXPECT_TRUE(m.device_range_ok(base, 0x1000, &dev));
  EXPECT_EQ(dev, 0);
  EXPECT_EQ(m.device_allocations(1).size(), 0u);
  // Adjacent ranges are fine.
  EXPECT_TRUE(m.add_device(DeviceRange{base + 0x1000, 0x1000, 1}));
  EXPECT_TRUE(m.add_device(DeviceRange{base - 0x1000, 0x1000, 1}));
  // A module variable seen again (the same GPU named by two devices) is accepted as known; a
  // different variable over it is not.
  EXPECT_TRUE(m.add_device(DeviceRange{base + 0x4000, 0x100, 0, false}));
  EXPECT_TRUE(m.add_device(DeviceRange{base + 0x4000, 0x100, 1, false}));
  EXPECT_FALSE(m.add_device(DeviceRange{base + 0x4000, 0x200, 1, false}));
  EXPECT_FALSE(m.add_device(DeviceRange{base + 0x4000, 0x100, 1, true}));
}

TEST(AddressMap, DeviceAndHostRangesDoNotOverlap) {
  AddressMap m;
  const uint64_t base = 0x320000000000ull;
  EXPECT_TRUE(m.add_device(DeviceRange{base, 0x1000, 0}));
  EXPECT_FALSE(m.add_host(HostRange{base + 0x100, 0x10, 0, true, 0}));
  EXPECT_FALSE(m.add_host(HostRange{base - 0x100, 0x200, 0, true, 0}));
  EXPECT_TRUE(m.add_host(HostRange{base + 0x2000, 0x1000, 0, true, 0}));
  EXPECT_FALSE(m.add_device(DeviceRange{base + 0x2800, 0x1000, 1}));
  EXPECT_FALSE(m.find_host(base + 0x100).has_value());
  EXPECT_TRUE(m.find_host(base + 0x2800).has_value());
}

TEST(AddressMap, WindowsAreReservedAndExclusive) {
  AddressMap m;
  const uint64_t base = 0x330000000000ull, size = 1ull << 30;
  std::string why;
  ASSERT_TRUE(m.reserve_window(base, size, &why)) << why;
  // This process's own memory cannot land there.
  void* p = mmap(reinterpret_cast<void*>(base + (size >> 1)), 4096, PROT_READ,
                 MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE, -1, 0);
  EXPECT_EQ(p, MAP_FAILED);
  // A second window over it is refused, naming the range.
  EXPECT_FALSE(m.reserve_window(base + (size >> 1), size, &why));
  EXPECT_NE(why.find("0x330020000000"), std::string::npos) << why;
  // Allocations inside the window are device memory.
  EXPECT_TRUE(m.add_device(DeviceRange{base + 4096, 256, 2}));
  EXPECT_EQ(m.find_device(base + 4096 + 255)->device, 2);
  EXPECT_FALSE(m.find_device(base).has_value());
}

TEST(AddressWindowsConfig, LayoutSkipsWhereProgramsAreLoaded) {
  std::vector<std::string> errors;
  std::vector<rgpu::client::DeviceSpec> d(30);
  for (size_t i = 0; i < d.size(); ++i) d[i].text = "s/" + std::to_string(i);
  rgpu::client::assign_windows(d, rgpu::client::kDefaultVaBase, errors);
  EXPECT_TRUE(errors.empty());
  ASSERT_EQ(d.size(), 30u);
  EXPECT_EQ(d[0].window_base, 0x500000000000ull);
  EXPECT_EQ(d[4].window_base, 0x540000000000ull);
  EXPECT_EQ(d[5].window_base, 0x570000000000ull);  // 0x55.. and 0x56..: executables
  EXPECT_EQ(d[29].window_base, 0x6f0000000000ull);
  for (auto& x : d) EXPECT_EQ(x.window_size, 1ull << 40);
  // One more does not fit: refused, naming the first device left out.
  d.resize(31);
  d[30].text = "extra/0";
  rgpu::client::assign_windows(d, rgpu::client::kDefaultVaBase, errors);
  EXPECT_EQ(d.size(), 30u);
  ASSERT_EQ(errors.size(), 1u);
  EXPECT_NE(errors[0].find("'extra/0'"), std::string::npos) << errors[0];
}

TEST(AddressWindowsConfig, BaseMustBeAnAlignedAddress) {
  std::string why;
  EXPECT_EQ(rgpu::client::parse_va_base("0x600000000000", why), 0x600000000000ull);
  EXPECT_EQ(rgpu::client::parse_va_base(std::to_string(0x600000000000ull), why), 0x600000000000ull);
  for (const char* bad : {"", "0x", "zz", "0x600000000001", "0x1000", "0x700000000000", "-1"}) {
    EXPECT_FALSE(rgpu::client::parse_va_base(bad, why).has_value()) << bad;
    EXPECT_NE(why.find("RGPU_VA_BASE"), std::string::npos);
  }
}

// cuMemMap mappings that follow each other are one range for copies and memsets; other ranges
// (allocations, gaps, another device's mappings) are not joined.
TEST(AddressMap, VmmMappingsJoin) {
  AddressMap m;
  const uint64_t base = 0x310000000000ull, g = 2u << 20;
  DeviceRange a{base, g, 0, false};
  a.vmm = true;
  DeviceRange b = a;
  b.base = base + g;
  DeviceRange c = a;
  c.base = base + 3 * g;  // a gap of one granule before it
  ASSERT_TRUE(m.add_device(a));
  ASSERT_TRUE(m.add_device(b));
  ASSERT_TRUE(m.add_device(c));
  int dev = -1;
  EXPECT_TRUE(m.device_range_ok(base + g - 8, 16, &dev));
  EXPECT_EQ(dev, 0);
  EXPECT_TRUE(m.device_range_ok(base, 2 * g, nullptr));
  EXPECT_FALSE(m.device_range_ok(base, 2 * g + 1, nullptr));  // into the gap
  EXPECT_FALSE(m.device_range_ok(base + 2 * g - 8, g, nullptr));
  DeviceRange d = a;
  d.base = base + 4 * g;
  d.device = 1;  // another device's mapping right after c
  ASSERT_TRUE(m.add_device(d));
  EXPECT_FALSE(m.device_range_ok(base + 4 * g - 8, 16, nullptr));
  // A plain allocation is never joined, even right after a mapping.
  ASSERT_TRUE(m.add_device(DeviceRange{base + 5 * g, g, 1}));
  EXPECT_FALSE(m.device_range_ok(base + 5 * g - 8, 16, nullptr));
  m.remove_device(b.base);
  EXPECT_FALSE(m.device_range_ok(base + g - 8, 16, nullptr));
}

TEST(AllocationTable, JoinableRanges) {
  rgpu::server::AllocationTable t;
  const uint64_t g = 2u << 20, base = 0x500000000000ull;
  t.add(base, g, false, true);
  t.add(base + g, g, false, true);
  t.add(base + 2 * g, g, true);  // an allocation right after: not joined
  EXPECT_TRUE(t.contains(base + g - 4, 8));
  EXPECT_TRUE(t.contains(base, 2 * g));
  EXPECT_FALSE(t.contains(base, 2 * g + 1));
  EXPECT_FALSE(t.contains(base + 3 * g - 4, 8));
  EXPECT_EQ(t.freeable_bytes(), g);
  EXPECT_FALSE(t.is_base(base));
  t.remove(base + g);
  EXPECT_FALSE(t.contains(base + g - 4, 8));
  // Ordinary ranges side by side stay separate.
  rgpu::server::AllocationTable u;
  u.add(base, g);
  u.add(base + g, g);
  EXPECT_FALSE(u.contains(base + g - 4, 8));
}
