// Rules of accelerator-nvidia-utilization over hand-built snapshots (no NVML).
#include "components/nvidia/utilization.h"

#include <gtest/gtest.h>

#include "components/nvidia/test_snapshot.h"

namespace gpud::components {
namespace {

using namespace testing;

TEST(Utilization, ReportsPercents) {
  auto s = h100x(1);
  s.gpus[0].utilization = ok(nvml::Utilization{97, 40});
  auto v = evaluate_utilization(s);
  EXPECT_EQ(v.health(), Health::kHealthy);
  EXPECT_EQ(v.gpus[0].data["gpu_used_percent"], 97);
  EXPECT_EQ(v.gpus[0].data["memory_used_percent"], 40);
}

TEST(Utilization, NvmlErrorIsUnhealthyAndShownAsError) {
  auto s = h100x(2);
  s.gpus[0].utilization = errored<nvml::Utilization>();
  auto v = evaluate_utilization(s);
  EXPECT_EQ(v.health(), Health::kUnhealthy);
  EXPECT_EQ(v.findings_for(0).size(), 1U);
  EXPECT_EQ(v.gpus[0].cells, (std::vector<std::string>{"error", "error"}));
  EXPECT_FALSE(v.gpus[0].data.contains("gpu_used_percent"));
}

}  // namespace
}  // namespace gpud::components
