#include "host/loadavg.h"

#include <gtest/gtest.h>

#include "host/host_fs.h"

namespace gpud::host {
namespace {

TEST(LoadAvg, ParsesRecordedFile) {
  HostFs fs(std::string(GPUD_SOURCE_DIR) + "/testing/fixtures/host/debian12");
  auto text = fs.read("/proc/loadavg");
  ASSERT_TRUE(text.ok());
  auto r = parse_loadavg(*text);
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_GE(r->one, 0);
  EXPECT_GT(r->tasks, 0);
}

TEST(LoadAvg, ParsesAveragesAndTaskCounts) {
  auto r = parse_loadavg("0.52 0.40 0.31 4/102 5417\n");
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_DOUBLE_EQ(r->one, 0.52);
  EXPECT_DOUBLE_EQ(r->five, 0.40);
  EXPECT_DOUBLE_EQ(r->fifteen, 0.31);
  EXPECT_EQ(r->runnable, 4);
  EXPECT_EQ(r->tasks, 102);
}

TEST(LoadAvg, TaskCountsAreOptional) {
  auto r = parse_loadavg("12.00 8.50 4.25");
  ASSERT_TRUE(r.ok());
  EXPECT_DOUBLE_EQ(r->fifteen, 4.25);
  EXPECT_EQ(r->tasks, 0);
}

TEST(LoadAvg, TooFewOrBadFieldsAreErrors) {
  EXPECT_FALSE(parse_loadavg("").ok());
  EXPECT_FALSE(parse_loadavg("0.1 0.2").ok());
  EXPECT_FALSE(parse_loadavg("0.1 abc 0.3 1/2 3").ok());
  EXPECT_FALSE(parse_loadavg("0.1 -0.2 0.3").ok());
}

}  // namespace
}  // namespace gpud::host
