// Rules of accelerator-nvidia-hw-slowdown over hand-built snapshots (no NVML).
#include "components/nvidia/hw_slowdown.h"

#include <gtest/gtest.h>

#include "components/nvidia/test_snapshot.h"

namespace gpud::components {
namespace {

using namespace testing;
using namespace std::chrono_literals;

TEST(HwSlowdown, RecordsOneEventPerGpuWithHwReason) {
  auto s = h100x(8);
  s.gpus[1].clocks_event_reasons = ok<uint64_t>(0x8);
  s.gpus[6].clocks_event_reasons = ok<uint64_t>(0xC0);
  s.gpus[2].clocks_event_reasons = ok<uint64_t>(0x4);  // SW power cap: not HW
  TimePoint now = Clock::now();
  auto ev = hw_slowdown_events(s, now);
  ASSERT_EQ(ev.size(), 2U);
  EXPECT_EQ(ev[0].name, "hw_slowdown");
  EXPECT_EQ(ev[0].message, "GPU-00000001: HW Slowdown");
  EXPECT_EQ(ev[1].message, "GPU-00000006: HW Thermal Slowdown, HW Power Brake Slowdown");
  EXPECT_EQ(ev[0].time, std::chrono::time_point_cast<std::chrono::minutes>(now));
  auto v = evaluate_hw_slowdown(s, ev, now);
  EXPECT_EQ(v.health(), Health::kHealthy);  // one minute in ten
  EXPECT_EQ(v.data["window_minutes_with_events"], 1);
  EXPECT_EQ(v.data["window_events"], 2);
  EXPECT_EQ(v.gpus[6].data["hw_slowdown_reasons"],
            (std::vector<std::string>{"HW Thermal Slowdown", "HW Power Brake Slowdown"}));
  EXPECT_EQ(v.gpus[6].cells[0], "0xc0");
}

std::vector<Event> slowdown_minutes(TimePoint now, int minutes) {
  std::vector<Event> out;
  for (int i = 0; i < minutes; ++i) {
    Event e;
    e.name = "hw_slowdown";
    e.time = now - std::chrono::minutes(i);
    out.push_back(e);
    out.push_back(e);  // two GPUs in the same minute count once
  }
  return out;
}

TEST(HwSlowdown, SixOfTenMinutesNeedsInspection) {
  TimePoint now = Clock::now();
  auto s = h100x(2);
  s.gpus[0].clocks_event_reasons = ok<uint64_t>(0x8);
  auto v = evaluate_hw_slowdown(s, slowdown_minutes(now, 6), now);
  EXPECT_EQ(v.health(), Health::kUnhealthy);
  EXPECT_EQ(v.action(), RepairAction::kHardwareInspection);
  EXPECT_EQ(v.data["frequency"], 0.6);
  ASSERT_EQ(v.findings.size(), 1U);  // the frequency, about no single GPU
  EXPECT_FALSE(v.findings[0].gpu);
  EXPECT_EQ(v.reason_suffix, "; now: GPU 0 (0000:10:00.0): HW Slowdown");
}

TEST(HwSlowdown, FiveOfTenMinutesIsHealthy) {
  TimePoint now = Clock::now();
  EXPECT_EQ(evaluate_hw_slowdown(h100x(1), slowdown_minutes(now, 5), now).health(),
            Health::kHealthy);
}

TEST(HwSlowdown, EventsOutsideTheWindowDoNotCount) {
  TimePoint now = Clock::now();
  auto ev = slowdown_minutes(now - 30min, 10);
  EXPECT_EQ(evaluate_hw_slowdown(h100x(1), ev, now).health(), Health::kHealthy);
}

TEST(HwSlowdown, UnsupportedReasonsAreNotApplicable) {
  auto s = h100x(1);
  s.gpus[0].clocks_event_reasons = not_supported<uint64_t>();
  EXPECT_TRUE(hw_slowdown_events(s, Clock::now()).empty());
  EXPECT_EQ(evaluate_hw_slowdown(s, {}, Clock::now()).health(), Health::kHealthy);
}

}  // namespace
}  // namespace gpud::components
