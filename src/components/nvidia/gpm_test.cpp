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
  auto v = evaluate_gpm(s);
  EXPECT_EQ(v.health(), Health::kHealthy);
  EXPECT_EQ(v.healthy_reason, "GPM supported on 1/2 GPU(s)");
  EXPECT_EQ(v.gpus[0].data["supported"], true);
  EXPECT_EQ(v.gpus[1].cells[1], "not supported");

  Result<std::vector<nvml::GpmGpuResult>> baseline(
      std::vector<nvml::GpmGpuResult>{{0, "baseline sample taken", false, {}, {}}});
  v = evaluate_gpm(s, &baseline);
  EXPECT_EQ(v.gpus[0].data["sampling"], "baseline sample taken");
  EXPECT_EQ(v.data["metrics_sampled"], false);

  nvml::GpmGpuResult g0{0,
                        "",
                        false,
                        {{"sm_occupancy", 41.5}, {"fp32_util", 3}, {"pcie_tx", 2.5}},
                        std::chrono::milliseconds(60000)};
  Result<std::vector<nvml::GpmGpuResult>> values(std::vector<nvml::GpmGpuResult>{g0});
  v = evaluate_gpm(s, &values);
  EXPECT_EQ(v.health(), Health::kHealthy);
  EXPECT_EQ(v.data["metrics_sampled"], true);
  EXPECT_EQ(v.gpus[0].data["metrics"]["sm_occupancy_percent"], 41.5);
  EXPECT_EQ(v.gpus[0].data["window_seconds"], 60);
  EXPECT_EQ(v.gpus[0].cells[2], "41.5");
  // NVML's PCIe rates are MiB/s; gpud serves bytes per second.
  EXPECT_EQ(v.gpus[0].data["metrics"]["pcie_tx_bytes_per_second"], 2.5 * 1048576);

  Result<std::vector<nvml::GpmGpuResult>> failed(
      std::vector<nvml::GpmGpuResult>{{0, "nvmlGpmSampleGet: In use", true, {}, {}}});
  v = evaluate_gpm(s, &failed);
  EXPECT_EQ(v.health(), Health::kHealthy);  // a metrics source's failure is no GPU fault
  EXPECT_TRUE(v.findings.empty());

  s.gpus[0].gpm_supported = errored<bool>();
  v = evaluate_gpm(s);
  EXPECT_EQ(v.health(), Health::kUnhealthy);
  ASSERT_EQ(v.findings.size(), 1U);
  EXPECT_EQ(v.findings[0].gpu, 0U);
}

TEST(Gpm, MetricNamesCarryTheirUnit) {
  auto name_of = [](std::string_view stem) {
    for (const auto& spec : nvml::kGpmMetrics)
      if (stem == spec.name) return gpm_metric_name(spec);
    return std::string();
  };
  EXPECT_EQ(name_of("sm_occupancy"), "accelerator_nvidia_gpm_gpu_sm_occupancy_percent");
  EXPECT_EQ(name_of("graphics_util"), "accelerator_nvidia_gpm_gpu_graphics_util_percent");
  EXPECT_EQ(name_of("dram_bw_util"), "accelerator_nvidia_gpm_gpu_dram_bw_util_percent");
  EXPECT_EQ(name_of("pcie_rx"), "accelerator_nvidia_gpm_gpu_pcie_rx_bytes_per_second");
  for (const auto& spec : nvml::kGpmMetrics)
    EXPECT_EQ(gpm_metric_value(spec, 3.0), spec.unit == nvml::GpmUnit::kPercent ? 3.0 : 3145728.0)
        << spec.name;
}

}  // namespace
}  // namespace gpud::components
