// Rules of accelerator-nvidia-remapped-rows over hand-built snapshots (no NVML).
#include "components/nvidia/remapped_rows.h"

#include <gtest/gtest.h>

#include "components/nvidia/test_snapshot.h"

namespace gpud::components {
namespace {

using namespace testing;

TEST(RemappedRows, NoRemapIsHealthy) {
  auto v = evaluate_remapped_rows(h100x(8));
  EXPECT_EQ(v.health(), Health::kHealthy);
  EXPECT_EQ(v.data["product"], "NVIDIA H100 80GB HBM3");
  EXPECT_EQ(v.gpus.size(), 8U);
}

TEST(RemappedRows, PendingRemapNeedsReboot) {
  auto s = h100x(8);
  s.gpus[2].remapped_rows = ok(nvml::RemappedRows{0, 1, true, false});
  auto v = evaluate_remapped_rows(s);
  EXPECT_EQ(v.health(), Health::kUnhealthy);
  EXPECT_EQ(v.action(), RepairAction::kRebootSystem);
  ASSERT_EQ(v.findings.size(), 1U);
  EXPECT_EQ(v.findings[0].gpu, 2U);
  EXPECT_EQ(v.gpus[2].data["remapping_pending"], true);
  EXPECT_EQ(v.action_description, "row remapping pending requires GPU reset or system reboot");
}

TEST(RemappedRows, FailedRemapNeedsInspectionOverReboot) {
  auto s = h100x(8);
  s.gpus[2].remapped_rows = ok(nvml::RemappedRows{0, 1, true, false});
  s.gpus[5].remapped_rows = ok(nvml::RemappedRows{2, 8, false, true});
  auto v = evaluate_remapped_rows(s);
  EXPECT_EQ(v.health(), Health::kUnhealthy);
  EXPECT_EQ(v.action(), RepairAction::kHardwareInspection);
  ASSERT_EQ(v.findings_for(5).size(), 1U);
  EXPECT_EQ(v.findings_for(5)[0].action, RepairAction::kHardwareInspection);
  EXPECT_EQ(v.gpus[5].data["remapped_due_to_uncorrectable_errors"], 8);
  EXPECT_EQ(v.action_description, "row remapping failed: the GPU qualifies for RMA");
}

TEST(RemappedRows, ProductWithoutRemappingIsNotApplicable) {
  auto s = h100x(1);
  s.gpus[0].name = ok<std::string>("NVIDIA GeForce RTX 4090");
  s.gpus[0].remapped_rows = not_supported<nvml::RemappedRows>();
  auto v = evaluate_remapped_rows(s);
  EXPECT_EQ(v.health(), Health::kHealthy);
  EXPECT_EQ(v.data["supported"], false);
  EXPECT_TRUE(v.columns.empty());
  EXPECT_EQ(v.healthy_reason, "NVIDIA GeForce RTX 4090 does not support row remapping");
}

TEST(RemappedRows, NvmlErrorIsUnhealthyButOtherGpusAreChecked) {
  auto s = h100x(3);
  s.gpus[0].remapped_rows = errored<nvml::RemappedRows>("Unknown Error");
  s.gpus[2].remapped_rows = ok(nvml::RemappedRows{0, 0, true, false});
  auto v = evaluate_remapped_rows(s);
  EXPECT_EQ(v.health(), Health::kUnhealthy);
  ASSERT_EQ(v.findings.size(), 2U);
  EXPECT_EQ(v.findings[0].gpu, 0U);
  EXPECT_TRUE(v.findings[0].nvml_error);
  EXPECT_EQ(v.findings[1].gpu, 2U);
}

}  // namespace
}  // namespace gpud::components
