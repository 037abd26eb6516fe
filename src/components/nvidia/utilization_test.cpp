// Rules of accelerator-nvidia-utilization over hand-built snapshots (no NVML).
#include "components/nvidia/utilization.h"

#include <gtest/gtest.h>

#include "components/nvidia/test_result.h"
#include "components/nvidia/test_snapshot.h"

namespace gpud::components {
namespace {

using namespace testing;

TEST(Utilization, ReportsPercents) {
  auto s = h100x(1);
  s.gpus[0].utilization = ok(nvml::Utilization{97, 40});
  auto r = evaluate_utilization(s);
  EXPECT_EQ(r.health(), Health::kHealthy);
  EXPECT_EQ(data_of(r)["gpus"][0]["gpu_used_percent"], 97);
}

}  // namespace
}  // namespace gpud::components
