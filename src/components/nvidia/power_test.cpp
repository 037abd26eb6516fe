// Rules of accelerator-nvidia-power over hand-built snapshots (no NVML).
#include "components/nvidia/power.h"

#include <gtest/gtest.h>

#include "components/nvidia/test_result.h"
#include "components/nvidia/test_snapshot.h"

namespace gpud::components {
namespace {

using namespace testing;

TEST(Power, ReportsUsedPercentOfEnforcedLimit) {
  auto r = evaluate_power(h100x(1));
  EXPECT_EQ(r.health(), Health::kHealthy);
  EXPECT_EQ(data_of(r)["gpus"][0]["used_percent"], "10.14");
}

TEST(Power, FallsBackToManagementLimit) {
  auto s = h100x(1);
  s.gpus[0].power_enforced_limit_mw = not_supported<uint32_t>();
  s.gpus[0].power_management_limit_mw = ok<uint32_t>(142000);
  EXPECT_EQ(data_of(evaluate_power(s))["gpus"][0]["used_percent"], "50.00");
}

TEST(Power, NvmlErrorIsUnhealthy) {
  auto s = h100x(2);
  s.gpus[1].power_usage_mw = errored<uint32_t>("Timeout");
  auto r = evaluate_power(s);
  EXPECT_EQ(r.health(), Health::kUnhealthy);
  EXPECT_TRUE(contains(r.summary(), "GPU 1")) << r.summary();
}

}  // namespace
}  // namespace gpud::components
