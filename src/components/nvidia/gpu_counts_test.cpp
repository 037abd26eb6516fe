// Rules of accelerator-nvidia-gpu-counts over hand-built snapshots (no NVML).
#include "components/nvidia/gpu_counts.h"

#include <gtest/gtest.h>

#include "components/nvidia/test_snapshot.h"

namespace gpud::components {
namespace {

using namespace testing;
using namespace std::chrono_literals;

GpuCountInput counts(size_t nvml, int expected, size_t sysfs, std::vector<TimePoint> reboots = {},
                     std::vector<TimePoint> mismatches = {}) {
  GpuCountInput in;
  in.nvml_count = nvml;
  in.expected = expected;
  in.sysfs_count = sysfs;
  in.reboots = std::move(reboots);
  in.mismatches = std::move(mismatches);
  return in;
}

TEST(GpuCounts, NotCheckedWithoutExpectedCount) {
  GpuCountInput in;
  in.nvml_count = 7;
  auto v = evaluate_gpu_counts(in);
  EXPECT_EQ(v.health(), Health::kHealthy);
  EXPECT_EQ(v.healthy_reason,
            "GPU count thresholds not set and no NVIDIA GPU listed on the PCI bus, skipping");
  EXPECT_EQ(v.data["count_nvml"], 7);
}

TEST(GpuCounts, MatchingCountIsHealthy) {
  GpuCountInput in = counts(8, 8, 8);
  EXPECT_EQ(evaluate_gpu_counts(in).health(), Health::kHealthy);
}

TEST(GpuCounts, MissingGpuNeedsRebootFirst) {
  GpuCountInput in = counts(7, 8, 8, {}, {Clock::now()});
  auto v = evaluate_gpu_counts(in);
  EXPECT_EQ(v.health(), Health::kUnhealthy);
  EXPECT_EQ(v.action(), RepairAction::kRebootSystem);
  EXPECT_EQ(v.data["count_nvml"], 7);
  EXPECT_EQ(v.data["expected"], 8);
}

TEST(GpuCounts, MismatchAfterTwoRebootsNeedsInspection) {
  TimePoint t0 = Clock::now() - 10h;
  GpuCountInput in = counts(7, 8, 8, {t0, t0 + 2h}, {t0 - 1h, t0 + 1h, t0 + 3h});
  EXPECT_EQ(evaluate_gpu_counts(in).action(), RepairAction::kHardwareInspection);
}

TEST(GpuCounts, WithoutGpuCountFewerThanOnThePciBusIsUnhealthyNamingTheMissing) {
  GpuCountInput in;
  in.nvml_count = 7;
  in.sysfs_count = 8;
  in.missing_bus_ids = {"0000:5d:00.0"};
  in.mismatches = {Clock::now()};
  EXPECT_EQ(expected_gpu_count(in), 8);
  auto v = evaluate_gpu_counts(in);
  EXPECT_EQ(v.health(), Health::kUnhealthy);
  EXPECT_EQ(gpu_count_mismatch(in),
            "nvidia gpu count mismatch (found 7, expected 8 on the PCI bus); not seen by NVML: "
            "0000:5d:00.0");
  EXPECT_EQ(v.data["expected_from"], "pci");
  // More than the bus lists (sysfs hides some) is no fault without --gpu-count; with it, it is.
  in.nvml_count = 9;
  in.missing_bus_ids.clear();
  EXPECT_EQ(evaluate_gpu_counts(in).health(), Health::kHealthy);
  in.expected = 8;
  EXPECT_EQ(evaluate_gpu_counts(in).health(), Health::kUnhealthy);
}

TEST(GpuCounts, GpuCountOverridesThePciBus) {
  GpuCountInput in;
  in.nvml_count = 6;
  in.sysfs_count = 8;
  in.expected = 6;
  EXPECT_EQ(expected_gpu_count(in), 6);
  auto v = evaluate_gpu_counts(in);
  EXPECT_EQ(v.health(), Health::kHealthy);
  EXPECT_EQ(v.healthy_reason, "nvidia gpu count matches the expected 6");
  EXPECT_EQ(v.data["expected_from"], "gpu-count");
}

}  // namespace
}  // namespace gpud::components
