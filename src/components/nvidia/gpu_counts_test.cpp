// Rules of accelerator-nvidia-gpu-counts over hand-built snapshots (no NVML).
#include "components/nvidia/gpu_counts.h"

#include <gtest/gtest.h>

#include "components/nvidia/test_result.h"
#include "components/nvidia/test_snapshot.h"

namespace gpud::components {
namespace {

using namespace testing;
using namespace std::chrono_literals;

TEST(GpuCounts, NotCheckedWithoutExpectedCount) {
  GpuCountInput in;
  in.nvml_count = 7;
  auto r = evaluate_gpu_counts(in);
  EXPECT_EQ(r.health(), Health::kHealthy);
  EXPECT_TRUE(contains(r.summary(), "not set"));
}

TEST(GpuCounts, MatchingCountIsHealthy) {
  GpuCountInput in{8, 8, 8, {}, {}};
  EXPECT_EQ(evaluate_gpu_counts(in).health(), Health::kHealthy);
}

TEST(GpuCounts, MissingGpuNeedsRebootFirst) {
  GpuCountInput in{7, 8, 8, {}, {Clock::now()}};
  auto r = evaluate_gpu_counts(in);
  EXPECT_EQ(r.health(), Health::kUnhealthy);
  EXPECT_TRUE(contains(r.summary(), "found 7, expected 8")) << r.summary();
  EXPECT_EQ(action_of(r), RepairAction::kRebootSystem);
}

TEST(GpuCounts, MismatchAfterTwoRebootsNeedsInspection) {
  TimePoint t0 = Clock::now() - 10h;
  GpuCountInput in{7, 8, 8, {t0, t0 + 2h}, {t0 - 1h, t0 + 1h, t0 + 3h}};
  EXPECT_EQ(action_of(evaluate_gpu_counts(in)), RepairAction::kHardwareInspection);
}

}  // namespace
}  // namespace gpud::components
