// Rules of accelerator-nvidia-retired-pages over hand-built snapshots (no NVML).
#include "components/nvidia/retired_pages.h"

#include <gtest/gtest.h>

#include "components/nvidia/test_snapshot.h"

namespace gpud::components {
namespace {

using namespace testing;
using namespace std::chrono_literals;

TEST(RetiredPages, OnlyPreAmpereRetiresPages) {
  EXPECT_TRUE(snapshot_retires_pages(snapshot_of({v100(0)})));
  EXPECT_FALSE(snapshot_retires_pages(h100x(8)));
  auto s = snapshot_of({v100(0)});
  s.gpus[0].retired_pages = not_supported<nvml::RetiredPages>();
  EXPECT_FALSE(snapshot_retires_pages(s));
}

TEST(RetiredPages, NoRetiredPagesIsHealthy) {
  auto v = evaluate_retired_pages(snapshot_of({v100(0), v100(1)}), {});
  EXPECT_EQ(v.health(), Health::kHealthy);
  EXPECT_EQ(v.gpus[1].data["double_bit"], 0);
  EXPECT_EQ(v.gpus[1].cells, (std::vector<std::string>{"volta", "0", "0", "0", "no"}));
}

TEST(RetiredPages, PendingRetirementNeedsReboot) {
  auto s = snapshot_of({v100(0), v100(1)});
  s.gpus[1].retired_pages_pending = ok(true);
  auto v = evaluate_retired_pages(s, {});
  EXPECT_EQ(v.health(), Health::kUnhealthy);
  EXPECT_EQ(v.action(), RepairAction::kRebootSystem);
  ASSERT_EQ(v.findings.size(), 1U);
  EXPECT_EQ(v.findings[0].gpu, 1U);
  EXPECT_EQ(v.gpus[1].data["pending"], true);
}

TEST(RetiredPages, SixtyThreePagesNeedInspection) {
  auto s = snapshot_of({v100(0)});
  s.gpus[0].retired_pages = ok(nvml::RetiredPages{50, 12});
  EXPECT_EQ(evaluate_retired_pages(s, {}).health(), Health::kHealthy);
  s.gpus[0].retired_pages = ok(nvml::RetiredPages{50, 13});
  auto v = evaluate_retired_pages(s, {});
  EXPECT_EQ(v.health(), Health::kUnhealthy);
  EXPECT_EQ(v.action(), RepairAction::kHardwareInspection);
}

TEST(RetiredPages, DbeAboveSoftLimitGrowingWithinAWeekNeedsInspection) {
  TimePoint now = Clock::now();
  auto s = snapshot_of({v100(0)});
  s.gpus[0].retired_pages = ok(nvml::RetiredPages{0, 18});
  // First seen at 16 three days ago: 2 new DBE pages in the window.
  auto history = retired_pages_events(snapshot_of({[] {
                                        auto g = v100(0);
                                        g.retired_pages = ok(nvml::RetiredPages{0, 16});
                                        return g;
                                      }()}),
                                      {}, now - 72h);
  ASSERT_EQ(history.size(), 1U);
  auto v = evaluate_retired_pages(s, history);
  EXPECT_EQ(v.health(), Health::kUnhealthy);
  EXPECT_EQ(v.action(), RepairAction::kHardwareInspection);
  EXPECT_EQ(v.gpus[0].data["double_bit_growth_7d"], 2);
  // Without history (scan, or a steady count) the same count is only reported.
  EXPECT_EQ(evaluate_retired_pages(s, {}).health(), Health::kHealthy);
}

TEST(RetiredPages, EventOnlyWhenDbeCountChanges) {
  TimePoint now = Clock::now();
  auto s = snapshot_of({v100(0)});
  s.gpus[0].retired_pages = ok(nvml::RetiredPages{0, 3});
  auto first = retired_pages_events(s, {}, now - 1h);
  ASSERT_EQ(first.size(), 1U);
  EXPECT_TRUE(retired_pages_events(s, first, now).empty());
  s.gpus[0].retired_pages = ok(nvml::RetiredPages{0, 4});
  EXPECT_EQ(retired_pages_events(s, first, now).size(), 1U);
}

}  // namespace
}  // namespace gpud::components
