// Rules of accelerator-nvidia-temperature over hand-built snapshots (no NVML).
#include "components/nvidia/temperature.h"

#include <gtest/gtest.h>

#include "components/nvidia/test_snapshot.h"

namespace gpud::components {
namespace {

using namespace testing;

TEST(Temperature, NormalTemperaturesAreHealthy) {
  auto v = evaluate_temperature(h100x(8), 5);
  EXPECT_EQ(v.health(), Health::kHealthy);
  EXPECT_TRUE(v.findings.empty());
  ASSERT_EQ(v.gpus.size(), 8U);
  EXPECT_EQ(v.gpus[0].data["used_percent_slowdown"], "38.20");
  EXPECT_EQ(v.gpus[0].data["threshold_celsius_slowdown_margin"], 5);
}

TEST(Temperature, SmallMarginIsDegraded) {
  auto s = h100x(2);
  s.gpus[1].margin_temperature_c = ok(4);
  EXPECT_EQ(evaluate_temperature(s, 0).health(), Health::kHealthy);  // margin rule off
  auto v = evaluate_temperature(s, 5);
  EXPECT_EQ(v.health(), Health::kDegraded);
  ASSERT_EQ(v.findings.size(), 1U);
  EXPECT_EQ(v.findings[0].gpu, 1U);
  EXPECT_FALSE(v.findings[0].action);
  EXPECT_EQ(v.gpus[1].data["margin_temperature_celsius"], 4);
}

TEST(Temperature, CoreAboveGpuMaxIsDegraded) {
  auto s = h100x(1);
  s.gpus[0].temperature_c = ok(88);
  auto v = evaluate_temperature(s, 0);
  EXPECT_EQ(v.health(), Health::kDegraded);
  ASSERT_EQ(v.findings_for(0).size(), 1U);
  EXPECT_EQ(v.gpus[0].data["current_celsius_gpu_core"], 88);
}

TEST(Temperature, HbmAboveMemMaxIsDegraded) {
  auto s = h100x(8);
  s.gpus[4].temperature_hbm_c = ok(99);
  auto v = evaluate_temperature(s, 0);
  EXPECT_EQ(v.health(), Health::kDegraded);
  ASSERT_EQ(v.findings.size(), 1U);
  EXPECT_EQ(v.findings[0].gpu, 4U);
  EXPECT_EQ(v.gpus[4].data["current_celsius_hbm"], 99);
}

TEST(Temperature, UnsupportedHbmAndMarginAreNotApplicable) {
  auto s = h100x(1);
  s.gpus[0].temperature_hbm_c = not_supported<int>();
  s.gpus[0].margin_temperature_c = not_supported<int>();
  s.gpus[0].threshold_mem_max_c = not_supported<uint32_t>();
  auto v = evaluate_temperature(s, 5);
  EXPECT_EQ(v.health(), Health::kHealthy);
  EXPECT_EQ(v.gpus[0].data["hbm_temperature_supported"], false);
  EXPECT_EQ(v.gpus[0].cells[1], "n/a");  // the HBM column
}

TEST(Temperature, NvmlErrorIsUnhealthyWithText) {
  auto s = h100x(1);
  s.gpus[0].temperature_c = errored<int>("Unknown Error");
  auto v = evaluate_temperature(s, 0);
  EXPECT_EQ(v.health(), Health::kUnhealthy);
  ASSERT_EQ(v.findings.size(), 1U);
  EXPECT_TRUE(v.findings[0].nvml_error);
  EXPECT_EQ(v.gpus[0].data["current_celsius_gpu_core"], nullptr);
  EXPECT_EQ(v.gpus[0].cells[0], "error");
}

}  // namespace
}  // namespace gpud::components
