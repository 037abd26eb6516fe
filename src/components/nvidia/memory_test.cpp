// Rules of accelerator-nvidia-memory over hand-built snapshots (no NVML).
#include "components/nvidia/memory.h"

#include <gtest/gtest.h>

#include "components/nvidia/test_snapshot.h"

namespace gpud::components {
namespace {

using namespace testing;

TEST(GpuMemory, ReportsBytesAndPercent) {
  auto s = h100x(1);
  s.gpus[0].memory.value.used_bytes = s.gpus[0].memory.value.total_bytes / 4;
  auto v = evaluate_gpu_memory(s);
  EXPECT_EQ(v.health(), Health::kHealthy);
  EXPECT_EQ(v.gpus[0].data["used_percent"], "25.00");
  EXPECT_EQ(v.gpus[0].data["total_bytes"], 85520809984ULL);
}

TEST(GpuMemory, UnsupportedIsNotAnError) {
  auto s = h100x(1);
  s.gpus[0].memory = not_supported<nvml::Memory>();
  auto v = evaluate_gpu_memory(s);
  EXPECT_EQ(v.health(), Health::kHealthy);
  EXPECT_EQ(v.gpus[0].data["supported"], false);
  EXPECT_EQ(v.gpus[0].cells[0], "n/a");
}

}  // namespace
}  // namespace gpud::components
