// Rules of accelerator-nvidia-info over hand-built snapshots (no NVML).
#include "components/nvidia/info.h"

#include <gtest/gtest.h>

#include "components/nvidia/test_result.h"
#include "components/nvidia/test_snapshot.h"

namespace gpud::components {
namespace {

using namespace testing;

TEST(NvidiaInfo, ReportsProductDriverAndEveryGpu) {
  auto r = evaluate_info(h100x(8));
  EXPECT_EQ(r.health(), Health::kHealthy);
  auto d = data_of(r);
  EXPECT_EQ(d["product"], "NVIDIA H100 80GB HBM3");
  EXPECT_EQ(d["brand"], "Tesla");
  EXPECT_EQ(d["architecture"], "hopper");
  EXPECT_EQ(d["driver_version"], "550.54.15");
  EXPECT_EQ(d["cuda_version"], "12.4");
  EXPECT_EQ(d["gpu_count"], 8);
  EXPECT_EQ(d["gpus"][3]["uuid"], "GPU-00000003");
  EXPECT_EQ(d["gpus"][3]["minor_number"], 3);
  EXPECT_TRUE(contains(r.detail, "GPU-00000007"));
}

TEST(NvidiaInfo, ErroredFieldStaysHealthy) {
  auto s = h100x(1);
  s.gpus[0].serial = errored<std::string>();
  EXPECT_EQ(evaluate_info(s).health(), Health::kHealthy);
}

}  // namespace
}  // namespace gpud::components
