// Rules of accelerator-nvidia-clock-speed over hand-built snapshots (no NVML).
#include "components/nvidia/clock_speed.h"

#include <gtest/gtest.h>

#include "components/nvidia/test_snapshot.h"

namespace gpud::components {
namespace {

using namespace testing;

TEST(ClockSpeed, ReportsClocks) {
  auto v = evaluate_clock_speed(h100x(1));
  EXPECT_EQ(v.health(), Health::kHealthy);
  EXPECT_EQ(v.gpus[0].data["memory_mhz"], 2619);
  EXPECT_EQ(v.gpus[0].data["sm_mhz"], 345);
  EXPECT_EQ(v.gpus[0].cells, (std::vector<std::string>{"345", "2619", "345"}));
}

TEST(ClockSpeed, NvmlErrorIsUnhealthy) {
  auto s = h100x(1);
  s.gpus[0].clock_sm_mhz = errored<uint32_t>();
  auto v = evaluate_clock_speed(s);
  EXPECT_EQ(v.health(), Health::kUnhealthy);
  ASSERT_EQ(v.findings.size(), 1U);
  EXPECT_TRUE(v.findings[0].nvml_error);
  EXPECT_EQ(v.gpus[0].data["sm_mhz"], nullptr);
}

}  // namespace
}  // namespace gpud::components
