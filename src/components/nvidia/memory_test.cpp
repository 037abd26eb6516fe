// Rules of accelerator-nvidia-memory over hand-built snapshots (no NVML).
#include "components/nvidia/memory.h"

#include <gtest/gtest.h>

#include "components/nvidia/test_result.h"
#include "components/nvidia/test_snapshot.h"

namespace gpud::components {
namespace {

using namespace testing;

TEST(GpuMemory, ReportsBytesAndPercent) {
  auto s = h100x(1);
  s.gpus[0].memory.value.used_bytes = s.gpus[0].memory.value.total_bytes / 4;
  auto r = evaluate_gpu_memory(s);
  EXPECT_EQ(r.health(), Health::kHealthy);
  EXPECT_EQ(data_of(r)["gpus"][0]["used_percent"], "25.00");
}

TEST(GpuMemory, UnsupportedIsNotAnError) {
  auto s = h100x(1);
  s.gpus[0].memory = not_supported<nvml::Memory>();
  EXPECT_EQ(evaluate_gpu_memory(s).health(), Health::kHealthy);
}

}  // namespace
}  // namespace gpud::components
