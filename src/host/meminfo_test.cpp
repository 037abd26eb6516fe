#include "host/meminfo.h"

#include <gtest/gtest.h>

#include "host/host_fs.h"

namespace gpud::host {
namespace {

std::string fixture(const std::string& name) {
  HostFs fs(std::string(GPUD_SOURCE_DIR) + "/testing/fixtures/host/" + name);
  return fs.read("/proc/meminfo").value_or("");
}

TEST(MemInfo, ParsesRecordedFileInBytes) {
  auto r = parse_meminfo(fixture("debian12"));
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_EQ(r->total_bytes, 24683620ULL * 1024);
  EXPECT_FALSE(r->available_estimated);
  EXPECT_GT(r->available_bytes, 0u);
  EXPECT_LE(r->available_bytes, r->total_bytes);
  EXPECT_EQ(r->used_bytes(), r->total_bytes - r->available_bytes);
}

TEST(MemInfo, UsedIsTotalMinusAvailable) {
  auto r = parse_meminfo(
      "MemTotal: 1000 kB\nMemFree: 100 kB\nMemAvailable: 250 kB\nBuffers: 10 kB\nCached: 50 kB\n");
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->used_bytes(), 750u * 1024);
  EXPECT_DOUBLE_EQ(r->used_percent(), 75.0);
  EXPECT_EQ(r->free_bytes, 100u * 1024);
}

TEST(MemInfo, OldKernelWithoutMemAvailableEstimatesFromFreeBuffersCached) {
  auto r = parse_meminfo(fixture("old-kernel"));
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_TRUE(r->available_estimated);
  EXPECT_EQ(r->available_bytes, (1203412ULL + 402184 + 9804604) * 1024);
  EXPECT_EQ(r->swap_total_bytes, 8388604ULL * 1024);
}

TEST(MemInfo, VmallocTotalAndUsedInBytesAbsentWithoutTheirLines) {
  auto r = parse_meminfo(fixture("debian12"));
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_EQ(r->vmalloc_total_bytes, 34359738367ULL * 1024);
  EXPECT_EQ(r->vmalloc_used_bytes, 14412ULL * 1024);
  r = parse_meminfo("MemTotal: 1000 kB\nMemAvailable: 250 kB\n");
  ASSERT_TRUE(r.ok());
  EXPECT_FALSE(r->vmalloc_total_bytes.has_value());
  EXPECT_FALSE(r->vmalloc_used_bytes.has_value());
}

TEST(MemInfo, MissingMemTotalIsAnError) {
  EXPECT_FALSE(parse_meminfo("MemFree: 100 kB\n").ok());
  EXPECT_FALSE(parse_meminfo("").ok());
}

TEST(MemInfo, BadNumberIsAnError) { EXPECT_FALSE(parse_meminfo("MemTotal: lots kB\n").ok()); }

TEST(MemInfo, ZeroTotalGivesZeroPercent) {
  auto r = parse_meminfo("MemTotal: 0 kB\nMemAvailable: 0 kB\n");
  ASSERT_TRUE(r.ok());
  EXPECT_DOUBLE_EQ(r->used_percent(), 0.0);
}

}  // namespace
}  // namespace gpud::host
