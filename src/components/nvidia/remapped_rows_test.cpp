// Rules of accelerator-nvidia-remapped-rows over hand-built snapshots (no NVML).
#include "components/nvidia/remapped_rows.h"

#include <gtest/gtest.h>

#include "components/nvidia/test_result.h"
#include "components/nvidia/test_snapshot.h"

namespace gpud::components {
namespace {

using namespace testing;

TEST(RemappedRows, NoRemapIsHealthy) {
  EXPECT_EQ(evaluate_remapped_rows(h100x(8)).health(), Health::kHealthy);
}

TEST(RemappedRows, PendingRemapNeedsReboot) {
  auto s = h100x(8);
  s.gpus[2].remapped_rows = ok(nvml::RemappedRows{0, 1, true, false});
  auto r = evaluate_remapped_rows(s);
  EXPECT_EQ(r.health(), Health::kUnhealthy);
  EXPECT_EQ(action_of(r), RepairAction::kRebootSystem);
  EXPECT_TRUE(contains(r.summary(), "GPU 2")) << r.summary();
  EXPECT_TRUE(contains(r.summary(), "pending row remapping")) << r.summary();
}

TEST(RemappedRows, FailedRemapNeedsInspectionOverReboot) {
  auto s = h100x(8);
  s.gpus[2].remapped_rows = ok(nvml::RemappedRows{0, 1, true, false});
  s.gpus[5].remapped_rows = ok(nvml::RemappedRows{2, 8, false, true});
  auto r = evaluate_remapped_rows(s);
  EXPECT_EQ(r.health(), Health::kUnhealthy);
  EXPECT_EQ(action_of(r), RepairAction::kHardwareInspection);
  EXPECT_TRUE(contains(r.summary(), "GPU 5")) << r.summary();
  EXPECT_TRUE(contains(r.summary(), "RMA")) << r.summary();
}

TEST(RemappedRows, ProductWithoutRemappingIsNotApplicable) {
  auto s = h100x(1);
  s.gpus[0].name = ok<std::string>("NVIDIA GeForce RTX 4090");
  s.gpus[0].remapped_rows = not_supported<nvml::RemappedRows>();
  auto r = evaluate_remapped_rows(s);
  EXPECT_EQ(r.health(), Health::kHealthy);
  EXPECT_TRUE(contains(r.summary(), "does not support row remapping"));
}

TEST(RemappedRows, NvmlErrorIsUnhealthyButOtherGpusAreChecked) {
  auto s = h100x(3);
  s.gpus[0].remapped_rows = errored<nvml::RemappedRows>("Unknown Error");
  s.gpus[2].remapped_rows = ok(nvml::RemappedRows{0, 0, true, false});
  auto r = evaluate_remapped_rows(s);
  EXPECT_EQ(r.health(), Health::kUnhealthy);
  EXPECT_TRUE(contains(r.summary(), "GPU 0")) << r.summary();
  EXPECT_TRUE(contains(r.summary(), "GPU 2")) << r.summary();
}

}  // namespace
}  // namespace gpud::components
