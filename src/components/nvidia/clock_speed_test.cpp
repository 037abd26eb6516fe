// Rules of accelerator-nvidia-clock-speed over hand-built snapshots (no NVML).
#include "components/nvidia/clock_speed.h"

#include <gtest/gtest.h>

#include "components/nvidia/test_result.h"
#include "components/nvidia/test_snapshot.h"

namespace gpud::components {
namespace {

using namespace testing;

TEST(ClockSpeed, ReportsClocks) {
  auto r = evaluate_clock_speed(h100x(1));
  EXPECT_EQ(r.health(), Health::kHealthy);
  EXPECT_EQ(data_of(r)["gpus"][0]["memory_mhz"], 2619);
  EXPECT_EQ(data_of(r)["gpus"][0]["sm_mhz"], 345);
}

}  // namespace
}  // namespace gpud::components
