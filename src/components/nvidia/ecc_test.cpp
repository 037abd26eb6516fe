// Rules of accelerator-nvidia-ecc over hand-built snapshots (no NVML).
#include "components/nvidia/ecc.h"

#include <gtest/gtest.h>

#include "components/nvidia/test_result.h"
#include "components/nvidia/test_snapshot.h"

namespace gpud::components {
namespace {

using namespace testing;

TEST(Ecc, NoErrorsIsHealthy) {
  auto r = evaluate_ecc(h100x(8));
  EXPECT_EQ(r.health(), Health::kHealthy);
  EXPECT_EQ(data_of(r)["gpus"][0]["ecc_mode"]["enabled_current"], true);
}

TEST(Ecc, VolatileUncorrectableNeedsReboot) {
  auto s = h100x(8);
  s.gpus[2].ecc_total.value.volatile_uncorrected = 1;
  s.gpus[2].ecc_by_location[nvml::NVML_MEMORY_LOCATION_DRAM].value.volatile_uncorrected = 1;
  auto r = evaluate_ecc(s);
  EXPECT_EQ(r.health(), Health::kUnhealthy);
  EXPECT_EQ(action_of(r), RepairAction::kRebootSystem);
  EXPECT_TRUE(contains(r.summary(), "GPU 2")) << r.summary();
  EXPECT_TRUE(contains(r.summary(), "dram")) << r.summary();
}

TEST(Ecc, AggregateOnlyErrorsAreReportedNotJudged) {
  auto s = h100x(1);
  s.gpus[0].ecc_total.value.aggregate_uncorrected = 12;
  s.gpus[0].ecc_total.value.volatile_corrected = 100;
  auto r = evaluate_ecc(s);
  EXPECT_EQ(r.health(), Health::kHealthy);
  EXPECT_EQ(data_of(r)["gpus"][0]["total"]["aggregate"]["uncorrected"], 12);
}

TEST(Ecc, UnsupportedIsNotApplicable) {
  auto s = h100x(1);
  s.gpus[0].ecc_mode = not_supported<nvml::EccMode>();
  s.gpus[0].ecc_total = not_supported<nvml::EccCounts>();
  for (auto& l : s.gpus[0].ecc_by_location) l = not_supported<nvml::EccCounts>();
  auto r = evaluate_ecc(s);
  EXPECT_EQ(r.health(), Health::kHealthy);
  EXPECT_TRUE(contains(r.summary(), "not supported")) << r.summary();
}

}  // namespace
}  // namespace gpud::components
