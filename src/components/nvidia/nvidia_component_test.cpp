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

// A collection past the answer wait but not its deadline is no verdict yet: the owner and every
// other component are Initializing "not checked: NVML is not answering…", with the error set. Past
// the deadline (a timeout) the owner is Unhealthy with REBOOT_SYSTEM and the others point at it.
TEST(NvidiaPreamble, NotAnsweringYetIsInitializingAndAHangIsTheOwnersUnhealthy) {
  NvidiaPreambleInput in;
  in.status = nvml::NvmlStatus::kReady;
  const std::string slow =
      "NVML is not answering: no reply for 1.0 s (a call is declared hung after 10 s)";
  const Result<std::shared_ptr<const nvml::NvmlSnapshot>> not_answering =
      make_error(slow, nvml::kNotAnsweringErrorCode);
  for (bool owner : {true, false}) {
    in.owner = owner;
    auto r =
        nvidia_preamble(owner ? kNvmlFaultOwner : "accelerator-nvidia-power", in, not_answering);
    ASSERT_TRUE(r.has_value());
    ASSERT_EQ(r->states.size(), 1U);
    EXPECT_EQ(r->states[0].health, Health::kInitializing) << owner;
    EXPECT_EQ(r->states[0].reason, "not checked: " + slow);
    EXPECT_EQ(r->states[0].error, slow);
    EXPECT_FALSE(r->states[0].suggested_actions.has_value());
  }
  const Result<std::shared_ptr<const nvml::NvmlSnapshot>> hung = make_error(
      "GPU 2: nvmlDeviceGetPowerUsage did not return within 10 s", nvml::kTimeoutErrorCode);
  in.owner = true;
  auto owner = nvidia_preamble(kNvmlFaultOwner, in, hung);
  ASSERT_TRUE(owner.has_value());
  EXPECT_EQ(owner->states[0].health, Health::kUnhealthy);
  ASSERT_TRUE(owner->states[0].suggested_actions.has_value());
  EXPECT_EQ(owner->states[0].suggested_actions->repair_actions,
            std::vector<RepairAction>{RepairAction::kRebootSystem});
  in.owner = false;
  auto other = nvidia_preamble("accelerator-nvidia-power", in, hung);
  ASSERT_TRUE(other.has_value());
  EXPECT_EQ(other->states[0].health, Health::kHealthy);
  EXPECT_NE(other->states[0].reason.find("(see accelerator-nvidia-info)"), std::string::npos);
}

// The GPU whose read hung is marked in the owner's data (its row in /v1/gpus): index, identity,
// "hung" and the call. The fault stays every GPU's; a hang of no single GPU's call marks none, and
// the other components mark nothing.
TEST(NvidiaPreamble, TheGpuWhoseCallHungIsMarkedInTheOwnersData) {
  NvidiaPreambleInput in;
  in.status = nvml::NvmlStatus::kReady;
  in.owner = true;
  const std::string report =
      "GPU 2 (0000:3a:00.0): nvmlDeviceGetPowerUsage did not return within 10 s";
  const Result<std::shared_ptr<const nvml::NvmlSnapshot>> hung =
      make_error(report, nvml::kTimeoutErrorCode);
  in.hang = nvml::HangReport{report, "nvmlDeviceGetPowerUsage", 2, "GPU-2", "0000:3a:00.0"};
  auto owner = nvidia_preamble(kNvmlFaultOwner, in, hung);
  ASSERT_TRUE(owner.has_value());
  const HealthState& s = owner->states[0];
  EXPECT_EQ(s.health, Health::kUnhealthy);
  EXPECT_EQ(s.data, nlohmann::json::parse(R"({"gpus": [{"index": 2, "uuid": "GPU-2",
      "bus_id": "0000:3a:00.0", "state": "hung", "call": "nvmlDeviceGetPowerUsage"}]})"));
  ASSERT_EQ(s.findings.size(), 1U);
  EXPECT_TRUE(s.findings[0].subject.is_every_gpu());

  in.owner = false;
  EXPECT_TRUE(nvidia_preamble("accelerator-nvidia-power", in, hung)->states[0].data.is_null());
  in.owner = true;
  in.hang->gpu_index.reset();  // the NVLink P2P status of every pair
  EXPECT_TRUE(nvidia_preamble(kNvmlFaultOwner, in, hung)->states[0].data.is_null());
  // Not answering yet (before the deadline): no GPU is known to have hung.
  in.hang->gpu_index = 2;
  const Result<std::shared_ptr<const nvml::NvmlSnapshot>> slow =
      make_error("NVML is not answering: no reply for 1.0 s", nvml::kNotAnsweringErrorCode);
  EXPECT_TRUE(nvidia_preamble(kNvmlFaultOwner, in, slow)->states[0].data.is_null());
}

}  // namespace
}  // namespace gpud::components
