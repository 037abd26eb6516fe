#include "host/fs_usage.h"

#include <gtest/gtest.h>

#include <chrono>

#include "testing/hung_mount.h"

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

// A mount that does not answer (a FUSE statfs that sleeps) costs the caller the deadline once, then
// nothing: the call is abandoned on its own thread, and later calls on that mount answer at once
// while it is still blocked; other mounts are untouched.
TEST(FsUsage, AHungMountAnswersAtTheDeadlineAndBlocksNothingElse) {
  using namespace std::chrono;
  testing::HungMount hung(30);
  if (!hung.why_not().empty()) GTEST_SKIP() << hung.why_not();
  HostFs fs("/");
  auto t0 = steady_clock::now();
  auto r = stat_fs_usage(fs, hung.path(), milliseconds(300));
  auto waited = steady_clock::now() - t0;
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().message, "mount " + hung.path() + " did not answer within 0.3 s");
  EXPECT_GE(waited, milliseconds(300));
  EXPECT_LT(waited, seconds(2));
  t0 = steady_clock::now();
  r = stat_fs_usage(fs, hung.path(), milliseconds(300));
  EXPECT_LT(steady_clock::now() - t0, milliseconds(100)) << "a second call must not wait again";
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().message.find("did not answer within 0.3 s (still)"), std::string::npos);
  EXPECT_TRUE(stat_fs_usage(fs, "/", milliseconds(300)).ok());
}

}  // namespace
}  // namespace gpud::host
