// Rules of accelerator-nvidia-gpm over hand-built snapshots (no NVML).
#include "components/nvidia/gpm.h"

#include <gtest/gtest.h>

#include "components/nvidia/test_snapshot.h"

namespace gpud::components {
namespace {

using namespace testing;

TEST(Gpm, SupportBaselineAndSampledValues) {
  auto s = identity_only_snapshot(2);
  s.gpus[0].gpm_supported = ok(true);
  s.gpus[1].gpm_supported = ok(false);
  EXPECT_EQ(gpm_capable_gpus(s), std::vector<unsigned int>{0});
  auto r = evaluate_gpm(s);
  EXPECT_EQ(r.health(), Health::kHealthy);
  EXPECT_EQ(r.states[0].reason, "GPM supported on 1/2 GPU(s)");

  Result<std::vector<nvml::GpmGpuResult>> baseline(
      std::vector<nvml::GpmGpuResult>{{0, "baseline sample taken", false, {}, {}}});
  EXPECT_NE(evaluate_gpm(s, &baseline).states[0].reason.find("first sample taken"),
            std::string::npos);

  nvml::GpmGpuResult g0{
      0, "", false, {{"sm_occupancy", 41.5}, {"fp32_util", 3}}, std::chrono::milliseconds(60000)};
  Result<std::vector<nvml::GpmGpuResult>> values(std::vector<nvml::GpmGpuResult>{g0});
  r = evaluate_gpm(s, &values);
  EXPECT_EQ(r.health(), Health::kHealthy);
  EXPECT_EQ(r.states[0].reason, "GPM supported on 1/2 GPU(s), metrics sampled on 1");
  EXPECT_NE(r.detail.find("41.5"), std::string::npos) << r.detail;
  const std::string& data = r.states[0].extra_info.at("data");
  EXPECT_NE(data.find("\"sm_occupancy_percent\":41.5"), std::string::npos) << data;
  EXPECT_EQ(gpm_metric_name("sm_occupancy"), "accelerator_nvidia_gpm_gpu_sm_occupancy_percent");

  Result<std::vector<nvml::GpmGpuResult>> failed(
      std::vector<nvml::GpmGpuResult>{{0, "nvmlGpmSampleGet: In use", true, {}, {}}});
  r = evaluate_gpm(s, &failed);
  EXPECT_EQ(r.health(), Health::kHealthy);
  EXPECT_NE(r.states[0].reason.find("GPM sampling failed: GPU 0"), std::string::npos)
      << r.states[0].reason;

  s.gpus[0].gpm_supported = errored<bool>();
  EXPECT_EQ(evaluate_gpm(s).health(), Health::kUnhealthy);
}

}  // namespace
}  // namespace gpud::components
