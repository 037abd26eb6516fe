// Rules of accelerator-nvidia-gpu-counts over hand-built snapshots (no NVML).
#include "components/nvidia/gpu_counts.h"

#include <gtest/gtest.h>

#include "components/nvidia/test_snapshot.h"

namespace gpud::components {
namespace {

using namespace testing;
using namespace std::chrono_literals;

TEST(GpuCounts, NotCheckedWithoutExpectedCount) {
  GpuCountInput in;
  in.nvml_count = 7;
  auto v = evaluate_gpu_counts(in);
  EXPECT_EQ(v.health(), Health::kHealthy);
  EXPECT_EQ(v.healthy_reason, "GPU count thresholds not set, skipping");
  EXPECT_EQ(v.data["count_nvml"], 7);
}

TEST(GpuCounts, MatchingCountIsHealthy) {
  GpuCountInput in{8, 8, 8, {}, {}};
  EXPECT_EQ(evaluate_gpu_counts(in).health(), Health::kHealthy);
}

TEST(GpuCounts, MissingGpuNeedsRebootFirst) {
  GpuCountInput in{7, 8, 8, {}, {Clock::now()}};
  auto v = evaluate_gpu_counts(in);
  EXPECT_EQ(v.health(), Health::kUnhealthy);
  EXPECT_EQ(v.action(), RepairAction::kRebootSystem);
  EXPECT_EQ(v.data["count_nvml"], 7);
  EXPECT_EQ(v.data["expected"], 8);
}

TEST(GpuCounts, MismatchAfterTwoRebootsNeedsInspection) {
  TimePoint t0 = Clock::now() - 10h;
  GpuCountInput in{7, 8, 8, {t0, t0 + 2h}, {t0 - 1h, t0 + 1h, t0 + 3h}};
  EXPECT_EQ(evaluate_gpu_counts(in).action(), RepairAction::kHardwareInspection);
}

}  // namespace
}  // namespace gpud::components
