// Rules of accelerator-nvidia-power over hand-built snapshots (no NVML).
#include "components/nvidia/power.h"

#include <gtest/gtest.h>

#include "components/nvidia/test_snapshot.h"

namespace gpud::components {
namespace {

using namespace testing;

TEST(Power, ReportsUsedPercentOfEnforcedLimit) {
  auto v = evaluate_power(h100x(1));
  EXPECT_EQ(v.health(), Health::kHealthy);
  EXPECT_EQ(v.gpus[0].data["used_percent"], "10.14");
  EXPECT_EQ(v.gpus[0].data["usage_milli_watts"], 71000);
  EXPECT_EQ(v.gpus[0].cells[0], "71.0");  // watts in the table
}

TEST(Power, FallsBackToManagementLimit) {
  auto s = h100x(1);
  s.gpus[0].power_enforced_limit_mw = not_supported<uint32_t>();
  s.gpus[0].power_management_limit_mw = ok<uint32_t>(142000);
  auto v = evaluate_power(s);
  EXPECT_EQ(v.gpus[0].data["used_percent"], "50.00");
  EXPECT_EQ(v.gpus[0].data["enforced_limit_milli_watts"], nullptr);
}

TEST(Power, NvmlErrorIsUnhealthy) {
  auto s = h100x(2);
  s.gpus[1].power_usage_mw = errored<uint32_t>("Timeout");
  auto v = evaluate_power(s);
  EXPECT_EQ(v.health(), Health::kUnhealthy);
  ASSERT_EQ(v.findings.size(), 1U);
  EXPECT_EQ(v.findings[0].gpu, 1U);
  EXPECT_TRUE(v.findings[0].nvml_error);
  EXPECT_EQ(v.gpus[1].data["used_percent"], nullptr);
}

// A GPU without the energy counter (before Volta) is not judged on it; a failed read is a reason.
TEST(Power, TotalEnergyIsReportedAndItsFailedReadIsAReason) {
  auto s = h100x(2);
  s.gpus[0].total_energy_mj = ok<uint64_t>(8123456789);
  s.gpus[1].total_energy_mj = not_supported<uint64_t>();
  auto v = evaluate_power(s);
  EXPECT_EQ(v.health(), Health::kHealthy);
  EXPECT_EQ(v.gpus[0].data["total_energy_milli_joules"], 8123456789ULL);
  EXPECT_EQ(v.gpus[1].data["total_energy_milli_joules"], nullptr);
  s.gpus[1].total_energy_mj = errored<uint64_t>("Unknown Error");
  v = evaluate_power(s);
  EXPECT_EQ(v.health(), Health::kUnhealthy);
  ASSERT_EQ(v.findings.size(), 1U);
  EXPECT_EQ(v.findings[0].gpu, 1U);
}

}  // namespace
}  // namespace gpud::components
