// Rules of accelerator-nvidia-temperature over hand-built snapshots (no NVML).
#include "components/nvidia/temperature.h"

#include <gtest/gtest.h>

#include "components/nvidia/test_result.h"
#include "components/nvidia/test_snapshot.h"

namespace gpud::components {
namespace {

using namespace testing;

TEST(Temperature, NormalTemperaturesAreHealthy) {
  auto r = evaluate_temperature(h100x(8), 5);
  EXPECT_EQ(r.health(), Health::kHealthy);
  EXPECT_EQ(data_of(r)["gpus"][0]["used_percent_slowdown"], "38.20");
}

TEST(Temperature, SmallMarginIsDegraded) {
  auto s = h100x(2);
  s.gpus[1].margin_temperature_c = ok(4);
  EXPECT_EQ(evaluate_temperature(s, 0).health(), Health::kHealthy);  // margin rule off
  auto r = evaluate_temperature(s, 5);
  EXPECT_EQ(r.health(), Health::kDegraded);
  EXPECT_TRUE(contains(r.summary(), "GPU 1")) << r.summary();
  EXPECT_TRUE(contains(r.summary(), "only 4 °C margin")) << r.summary();
}

TEST(Temperature, CoreAboveGpuMaxIsDegraded) {
  auto s = h100x(1);
  s.gpus[0].temperature_c = ok(88);
  auto r = evaluate_temperature(s, 0);
  EXPECT_EQ(r.health(), Health::kDegraded);
  EXPECT_TRUE(contains(r.summary(), "GPU temperature anomalies"));
}

TEST(Temperature, HbmAboveMemMaxIsDegraded) {
  auto s = h100x(8);
  s.gpus[4].temperature_hbm_c = ok(99);
  auto r = evaluate_temperature(s, 0);
  EXPECT_EQ(r.health(), Health::kDegraded);
  EXPECT_TRUE(contains(r.summary(), "HBM temperature anomalies: GPU 4")) << r.summary();
}

TEST(Temperature, UnsupportedHbmAndMarginAreNotApplicable) {
  auto s = h100x(1);
  s.gpus[0].temperature_hbm_c = not_supported<int>();
  s.gpus[0].margin_temperature_c = not_supported<int>();
  s.gpus[0].threshold_mem_max_c = not_supported<uint32_t>();
  auto r = evaluate_temperature(s, 5);
  EXPECT_EQ(r.health(), Health::kHealthy);
  EXPECT_EQ(data_of(r)["gpus"][0]["hbm_temperature_supported"], false);
}

TEST(Temperature, NvmlErrorIsUnhealthyWithText) {
  auto s = h100x(1);
  s.gpus[0].temperature_c = errored<int>("Unknown Error");
  auto r = evaluate_temperature(s, 0);
  EXPECT_EQ(r.health(), Health::kUnhealthy);
  EXPECT_TRUE(contains(r.states[0].error, "Unknown Error"));
}

}  // namespace
}  // namespace gpud::components
