// Rules of accelerator-nvidia-ecc over hand-built snapshots (no NVML).
#include "components/nvidia/ecc.h"

#include <gtest/gtest.h>

#include "components/nvidia/test_snapshot.h"

namespace gpud::components {
namespace {

using namespace testing;

TEST(Ecc, NoErrorsIsHealthy) {
  auto v = evaluate_ecc(h100x(8));
  EXPECT_EQ(v.health(), Health::kHealthy);
  EXPECT_EQ(v.gpus[0].data["ecc_mode"]["enabled_current"], true);
  EXPECT_EQ(v.gpus[0].cells, (std::vector<std::string>{"on", "0", "0", "0", "0"}));
}

TEST(Ecc, VolatileUncorrectableNeedsReboot) {
  auto s = h100x(8);
  s.gpus[2].ecc_total.value.volatile_uncorrected = 1;
  s.gpus[2].ecc_by_location[nvml::NVML_MEMORY_LOCATION_DRAM].value.volatile_uncorrected = 1;
  auto v = evaluate_ecc(s);
  EXPECT_EQ(v.health(), Health::kUnhealthy);
  EXPECT_EQ(v.action(), RepairAction::kRebootSystem);
  ASSERT_EQ(v.findings.size(), 1U);
  EXPECT_EQ(v.findings[0].gpu, 2U);
  EXPECT_NE(v.findings[0].reason.find("in dram"), std::string::npos) << v.findings[0].reason;
  EXPECT_EQ(v.gpus[2].data["locations"]["dram"]["volatile"]["uncorrected"], 1);
}

TEST(Ecc, AggregateOnlyErrorsAreReportedNotJudged) {
  auto s = h100x(1);
  s.gpus[0].ecc_total.value.aggregate_uncorrected = 12;
  s.gpus[0].ecc_total.value.volatile_corrected = 100;
  auto v = evaluate_ecc(s);
  EXPECT_EQ(v.health(), Health::kHealthy);
  EXPECT_EQ(v.gpus[0].data["total"]["aggregate"]["uncorrected"], 12);
}

TEST(Ecc, UnsupportedIsNotApplicable) {
  auto s = h100x(1);
  s.gpus[0].ecc_mode = not_supported<nvml::EccMode>();
  s.gpus[0].ecc_total = not_supported<nvml::EccCounts>();
  for (auto& l : s.gpus[0].ecc_by_location) l = not_supported<nvml::EccCounts>();
  auto v = evaluate_ecc(s);
  EXPECT_EQ(v.health(), Health::kHealthy);
  EXPECT_EQ(v.healthy_reason, "ECC not supported (not applicable)");
  EXPECT_EQ(v.gpus[0].cells, (std::vector<std::string>{"n/a", "n/a", "n/a", "n/a", "n/a"}));
}

}  // namespace
}  // namespace gpud::components
