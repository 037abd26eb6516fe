// What the NVIDIA base publishes from a component's metric table.
#include "components/nvidia/nvidia_component.h"

#include <gtest/gtest.h>

#include "components/nvidia/test_snapshot.h"

namespace gpud::components {
namespace {

using namespace testing;

constexpr GpuMetric kMetrics[] = {
    {"core_celsius", "core", MetricKind::kGauge, read_metric<&nvml::GpuSnapshot::temperature_c>},
};

std::map<std::string, double> values_by_gpu(const MetricRegistry& reg) {
  std::map<std::string, double> out;
  for (const auto& s : reg.snapshot(0)) out[s.labels.at("gpu")] = s.value;
  return out;
}

TEST(NvidiaComponent, AValueThatCannotBeReadIsNotServed) {
  MetricRegistry reg;
  auto s = h100x(2);
  publish_gpu_metrics(reg, "c", kMetrics, &s);
  EXPECT_EQ(values_by_gpu(reg), (std::map<std::string, double>{{"0", 34}, {"1", 34}}));
  auto snap = reg.snapshot(0);
  EXPECT_EQ(snap[0].labels.at("uuid"), "GPU-00000000");
  EXPECT_EQ(snap[0].labels.at("pci_bus_id"), "0000:10:00.0");

  s.gpus[1].temperature_c = errored<int>();
  publish_gpu_metrics(reg, "c", kMetrics, &s);
  EXPECT_EQ(values_by_gpu(reg), (std::map<std::string, double>{{"0", 34}}));

  publish_gpu_metrics(reg, "c", kMetrics, nullptr);  // no snapshot (NVML timed out)
  EXPECT_EQ(reg.series_count(), 0U);
}

TEST(NvidiaComponent, ReadMetricReadsAFieldOrOneOfItsMembers) {
  auto g = h100(0);
  g.remapped_rows = ok(nvml::RemappedRows{2, 3, true, false});
  EXPECT_EQ((read_metric<&nvml::GpuSnapshot::remapped_rows, &nvml::RemappedRows::uncorrected>(g)),
            3);
  EXPECT_EQ((read_metric<&nvml::GpuSnapshot::remapped_rows, &nvml::RemappedRows::pending>(g)), 1);
  EXPECT_EQ(read_metric<&nvml::GpuSnapshot::clock_sm_mhz>(g), 345);
  g.clock_sm_mhz = not_supported<uint32_t>();
  EXPECT_FALSE(read_metric<&nvml::GpuSnapshot::clock_sm_mhz>(g));
}

}  // namespace
}  // namespace gpud::components
