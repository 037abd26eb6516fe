#include "host/fs_usage.h"

#include <gtest/gtest.h>

namespace gpud::host {
namespace {

TEST(FsUsage, ConvertsBlocksWithFragmentSize) {
  struct statvfs st {};
  st.f_bsize = 4096;
  st.f_frsize = 1024;
  st.f_blocks = 1000;
  st.f_bfree = 300;
  st.f_bavail = 250;
  FsUsage u = fs_usage_from_statvfs(st);
  EXPECT_EQ(u.total_bytes, 1024000u);
  EXPECT_EQ(u.free_bytes, 307200u);
  EXPECT_EQ(u.available_bytes, 256000u);
  EXPECT_EQ(u.used_bytes, 716800u);
  // df: used / (used + available)
  EXPECT_NEAR(u.used_percent(), 100.0 * 700 / 950, 1e-9);
}

TEST(FsUsage, EmptyFilesystemIsZeroPercent) {
  struct statvfs st {};
  EXPECT_DOUBLE_EQ(fs_usage_from_statvfs(st).used_percent(), 0.0);
}

TEST(FsUsage, StatsAPathUnderTheHostRoot) {
  HostFs fs(std::string(GPUD_SOURCE_DIR) + "/testing/fixtures/host");
  auto u = stat_fs_usage(fs, "/debian12");
  ASSERT_TRUE(u.ok()) << u.error().message;
  EXPECT_GT(u->total_bytes, 0u);
  EXPECT_LE(u->available_bytes, u->total_bytes);
}

TEST(FsUsage, MissingPathIsAnErrorNamingIt) {
  HostFs fs(std::string(GPUD_SOURCE_DIR) + "/testing/fixtures/host");
  auto u = stat_fs_usage(fs, "/no/such/mount");
  ASSERT_FALSE(u.ok());
  EXPECT_NE(u.error().message.find("/no/such/mount"), std::string::npos);
}

}  // namespace
}  // namespace gpud::host
