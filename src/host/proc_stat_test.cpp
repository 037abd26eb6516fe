#include "host/proc_stat.h"

#include <gtest/gtest.h>

#include "host/host_fs.h"

namespace gpud::host {
namespace {

std::string fixture(const std::string& name, const char* file) {
  HostFs fs(std::string(GPUD_SOURCE_DIR) + "/testing/fixtures/host/" + name);
  auto r = fs.read(file);
  EXPECT_TRUE(r.ok()) << (r.ok() ? "" : r.error().message);
  return r.value_or("");
}

TEST(ProcStat, ParsesAggregateLineAndCountsCores) {
  auto r = parse_proc_stat(fixture("debian12", "/proc/stat"));
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_EQ(r->logical_cores, 2);
  EXPECT_EQ(r->aggregate.user, 48479u);
  EXPECT_EQ(r->aggregate.nice, 0u);
  EXPECT_EQ(r->aggregate.system, 13962u);
  EXPECT_EQ(r->aggregate.idle, 52679u);
  EXPECT_EQ(r->aggregate.iowait, 390u);
  EXPECT_EQ(r->aggregate.softirq, 139u);
  EXPECT_EQ(r->aggregate.total(), 48479u + 13962u + 52679u + 390u + 139u);
}

TEST(ProcStat, AggregateOnlyFileHasZeroCores) {
  auto r = parse_proc_stat(fixture("aggregate-only", "/proc/stat"));
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_EQ(r->logical_cores, 0);
  EXPECT_EQ(r->aggregate.user, 4705u);
  EXPECT_EQ(r->aggregate.nice, 356u);
}

TEST(ProcStat, OldKernelWithFourColumnsParses) {
  auto r = parse_proc_stat("cpu  10 20 30 40\ncpu0 10 20 30 40\n");
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_EQ(r->aggregate.idle, 40u);
  EXPECT_EQ(r->aggregate.iowait, 0u);
  EXPECT_EQ(r->logical_cores, 1);
}

TEST(ProcStat, MissingAggregateLineIsAnError) {
  EXPECT_FALSE(parse_proc_stat("cpu0 1 2 3 4 5\nintr 1\n").ok());
  EXPECT_FALSE(parse_proc_stat("").ok());
}

TEST(ProcStat, GarbageNumberIsAnError) {
  EXPECT_FALSE(parse_proc_stat("cpu  1 2 x 4 5\n").ok());
  EXPECT_FALSE(parse_proc_stat("cpu  1 2\n").ok());
}

TEST(ProcStat, CpuLikeLabelsAreNotCores) {
  auto r = parse_proc_stat("cpu  1 2 3 4\ncpu0 1 2 3 4\ncpufreq 1\ncpu1x 1\n");
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->logical_cores, 1);
}

TEST(CpuUsage, ComputesBusyShareOfDelta) {
  CpuTimes a{100, 0, 100, 700, 100, 0, 0, 0};
  CpuTimes b{150, 0, 150, 850, 150, 0, 0, 0};  // +100 busy, +200 idle/iowait
  auto pct = cpu_usage_percent(a, b);
  ASSERT_TRUE(pct.has_value());
  EXPECT_NEAR(*pct, 100.0 / 3.0, 1e-9);
}

TEST(CpuUsage, FullyBusyIsHundred) {
  CpuTimes a{100, 0, 0, 100, 0, 0, 0, 0};
  CpuTimes b{200, 0, 0, 100, 0, 0, 0, 0};
  EXPECT_DOUBLE_EQ(*cpu_usage_percent(a, b), 100.0);
}

TEST(CpuUsage, EqualSamplesGiveNoValue) {
  CpuTimes a{1, 2, 3, 4, 5, 6, 7, 8};
  EXPECT_FALSE(cpu_usage_percent(a, a).has_value());
}

TEST(CpuUsage, CounterResetGivesNoValue) {
  CpuTimes a{1000, 0, 1000, 1000, 0, 0, 0, 0};
  CpuTimes b{10, 0, 10, 10, 0, 0, 0, 0};
  EXPECT_FALSE(cpu_usage_percent(a, b).has_value());
}

TEST(CpuUsage, IowaitRunningBackwardsIsClampedIntoRange) {
  CpuTimes a{100, 0, 0, 100, 50, 0, 0, 0};
  CpuTimes b{150, 0, 0, 150, 40, 0, 0, 0};  // iowait went down by 10
  auto pct = cpu_usage_percent(a, b);
  ASSERT_TRUE(pct.has_value());
  EXPECT_NEAR(*pct, 50.0, 1e-9);
}

TEST(ProcStat, SmokeThisMachineHasShape) {
  HostFs fs("/");
  auto text = fs.read("/proc/stat");
  if (!text) GTEST_SKIP() << "no /proc/stat here";
  auto r = parse_proc_stat(*text);
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_GT(r->aggregate.total(), 0u);
  EXPECT_GE(r->logical_cores, 1);
}

}  // namespace
}  // namespace gpud::host
