#include "components/nvidia/gpu_health.h"

#include <gtest/gtest.h>

#include "components/nvidia/info.h"
#include "components/nvidia/verdict.h"
#include "testing/health_state.h"

namespace gpud::components {
namespace {

nvml::NvmlSnapshot four_gpus() {
  nvml::NvmlSnapshot s;
  const char* bus[] = {"0000:18:00.0", "0000:2a:00.0", "0000:3a:00.0", "0000:5d:00.0"};
  for (unsigned int i = 0; i < 4; ++i) {
    nvml::GpuSnapshot g;
    g.index = i;
    g.uuid.value = "GPU-" + std::to_string(i);
    g.uuid.status = nvml::FieldStatus::kOk;
    g.pci_bus_id.value = bus[i];
    g.pci_bus_id.status = nvml::FieldStatus::kOk;
    s.gpus.push_back(g);
  }
  return s;
}

using testing_support::health_state;

TEST(GpuHealth, EachGpuTakesTheWorstOfItsOwnFindings) {
  // Two per-GPU verdicts as render_verdict writes them, and an Xid on GPU 3 by bus id.
  NvidiaVerdict temp;
  nvml::GpuSnapshot g1 = four_gpus().gpus[1];
  temp.add(g1, Health::kDegraded, "GPU 1 (0000:2a:00.0) HBM over its limit");
  HealthState t = render_verdict("accelerator-nvidia-temperature", temp).states[0];
  NvidiaVerdict rows;
  rows.add(g1, Health::kUnhealthy, "GPU 1 needs reset");
  HealthState r = render_verdict("accelerator-nvidia-remapped-rows", rows).states[0];
  HealthState xid = health_state("accelerator-nvidia-error-xid", Health::kUnhealthy, "Xid 79");
  xid.extra_info["devices"] =
      R"([{"pci_bus_id":"0000:5D:00","code":79,"health":"Unhealthy","reason":"Xid 79 on 0000:5d:00"}])";
  auto gpus = gpu_health(four_gpus(), {t, r, xid, health_state("cpu", Health::kUnhealthy, "host")});
  ASSERT_EQ(gpus.size(), 4U);
  EXPECT_EQ(gpus[0].health, Health::kHealthy);
  EXPECT_TRUE(gpus[0].causes.empty());
  EXPECT_EQ(gpus[1].health, Health::kUnhealthy);
  ASSERT_EQ(gpus[1].causes.size(), 2U);
  EXPECT_EQ(gpus[1].causes[0].component, "accelerator-nvidia-remapped-rows");  // worst first
  EXPECT_EQ(gpus[1].causes[1].health, Health::kDegraded);
  EXPECT_EQ(gpus[2].health, Health::kHealthy);
  EXPECT_EQ(gpus[3].health, Health::kUnhealthy);
  ASSERT_EQ(gpus[3].causes.size(), 1U);
  EXPECT_EQ(gpus[3].causes[0].reason, "Xid 79 on 0000:5d:00");

  auto j = to_json(gpus);
  EXPECT_EQ(j[3]["uuid"], "GPU-3");
  EXPECT_EQ(j[3]["health"], "Unhealthy");
  EXPECT_EQ(j[3]["reasons"][0]["component"], "accelerator-nvidia-error-xid");

  MetricRegistry m;
  publish_gpu_health(m, gpus);
  std::string text = m.prometheus_text();
  EXPECT_NE(text.find("accelerator_nvidia_gpu_health{gpu=\"3\",health=\"Unhealthy\",pci_bus_id="
                      "\"0000:5d:00.0\",uuid=\"GPU-3\"} 1"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("accelerator_nvidia_gpu_health{gpu=\"3\",health=\"Healthy\",pci_bus_id="
                      "\"0000:5d:00.0\",uuid=\"GPU-3\"} 0"),
            std::string::npos);
  EXPECT_NE(text.find("accelerator_nvidia_gpu_health{gpu=\"0\",health=\"Healthy\",pci_bus_id="
                      "\"0000:18:00.0\",uuid=\"GPU-0\"} 1"),
            std::string::npos);
}

TEST(GpuHealth, ALostGpuIsItsOwnAndAHungDriverIsEveryGpus) {
  nvml::NvmlSnapshot snap = four_gpus();
  snap.gpus[2].lost = true;
  snap.gpus[2].fault_call = "nvmlDeviceGetName";
  snap.gpus[2].fault_error = "GPU is lost";
  HealthState lost = render_verdict(kNvmlFaultOwner, evaluate_info(snap)).states[0];
  auto gpus = gpu_health(snap, {lost});
  EXPECT_EQ(gpus[2].health, Health::kUnhealthy);
  EXPECT_NE(gpus[2].causes.at(0).reason.find("is lost"), std::string::npos);
  EXPECT_EQ(gpus[0].health, Health::kHealthy);
  EXPECT_EQ(gpus[3].health, Health::kHealthy);

  HealthState hung = health_state(std::string(kNvmlFaultOwner), Health::kUnhealthy,
                                  "GPU 2: nvmlDeviceGetPowerUsage did not return within 10 s");
  for (const auto& g : gpu_health(four_gpus(), {hung})) {
    EXPECT_EQ(g.health, Health::kUnhealthy) << g.index;
    EXPECT_EQ(g.causes.at(0).reason, hung.reason);
  }
}

TEST(GpuHealth, EachCauseCarriesItsSuggestedAction) {
  // A per-GPU finding with its own action, an Xid device with its own, and a component whose
  // finding has none: the state's action stands in.
  nvml::GpuSnapshot g0 = four_gpus().gpus[0];
  NvidiaVerdict rows;
  rows.add(g0, Health::kUnhealthy, "GPU 0 row remapping failed", RepairAction::kHardwareInspection);
  HealthState r = render_verdict("accelerator-nvidia-remapped-rows", rows).states[0];
  HealthState xid = health_state("accelerator-nvidia-error-xid", Health::kUnhealthy, "Xid 79");
  xid.extra_info["devices"] =
      R"([{"pci_bus_id":"0000:2a:00.0","code":79,"health":"Unhealthy","suggested_action":"REBOOT_SYSTEM","reason":"Xid 79"}])";
  HealthState ecc = health_state("accelerator-nvidia-ecc", Health::kUnhealthy, "GPU 3 ECC");
  ecc.extra_info["gpu_findings"] = R"([{"gpu":3,"health":"Unhealthy","reason":"GPU 3 ECC"}])";
  ecc.suggested_actions = SuggestedActions{"reset", {RepairAction::kRebootSystem}};
  HealthState temp = health_state("accelerator-nvidia-temperature", Health::kUnhealthy);
  temp.extra_info["gpu_findings"] = R"([{"gpu":2,"health":"Unhealthy","reason":"hot"}])";
  auto gpus = gpu_health(four_gpus(), {r, xid, ecc, temp});
  EXPECT_EQ(gpus[0].causes.at(0).action, RepairAction::kHardwareInspection);
  EXPECT_EQ(gpus[1].causes.at(0).action, RepairAction::kRebootSystem);
  EXPECT_EQ(gpus[3].causes.at(0).action, RepairAction::kRebootSystem);
  EXPECT_EQ(gpus[2].causes.at(0).action, std::nullopt);
}

// What a per-GPU alert reads: one cause series per cause, with its component, health, action and
// reason (cut on a character boundary), none for a Healthy GPU; a GPU that recovers loses its.
TEST(GpuHealth, CausesArePublishedPerGpuAndGoneOnRecovery) {
  HealthState xid = health_state("accelerator-nvidia-error-xid", Health::kUnhealthy, "Xid 79");
  xid.extra_info["devices"] =
      R"([{"pci_bus_id":"0000:2a:00.0","code":79,"health":"Unhealthy","suggested_action":"REBOOT_SYSTEM","reason":"XID 79 GPU has fallen off the bus"}])";
  HealthState hot = health_state("accelerator-nvidia-temperature", Health::kDegraded);
  const std::string long_reason = std::string(kGpuHealthCauseReasonBytes - 1, 'x') + "\xc3\xa9";
  hot.extra_info["gpu_findings"] =
      nlohmann::json::array({{{"gpu", 1}, {"health", "Degraded"}, {"reason", long_reason}}}).dump();
  MetricRegistry m;
  publish_gpu_health(m, gpu_health(four_gpus(), {xid, hot}));
  std::string text = m.prometheus_text();
  EXPECT_NE(text.find("accelerator_nvidia_gpu_health_cause{component=\"accelerator-nvidia-error-"
                      "xid\",gpu=\"1\",health=\"Unhealthy\",pci_bus_id=\"0000:2a:00.0\",reason="
                      "\"XID 79 GPU has fallen off the bus\",suggested_action=\"REBOOT_SYSTEM\","
                      "uuid=\"GPU-1\"} 1"),
            std::string::npos)
      << text;
  EXPECT_NE(
      text.find("health=\"Degraded\",pci_bus_id=\"0000:2a:00.0\",reason=\"" +
                std::string(kGpuHealthCauseReasonBytes - 1, 'x') + "\",suggested_action=\"\""),
      std::string::npos)
      << "cut before the character that does not fit: " << text;
  EXPECT_EQ(text.find("gpu_health_cause{component=\"accelerator-nvidia-error-xid\",gpu=\"0\""),
            std::string::npos);

  // A drill's cause says so.
  xid.extra_info["devices"] =
      R"js([{"pci_bus_id":"0000:2a:00.0","code":79,"health":"Unhealthy","suggested_action":"REBOOT_SYSTEM","reason":"XID 79 (injected)","injected":true}])js";
  publish_gpu_health(m, gpu_health(four_gpus(), {xid}));
  EXPECT_NE(m.prometheus_text().find("accelerator_nvidia_gpu_health_cause{component=\"accelerator-"
                                     "nvidia-error-xid\",gpu=\"1\",health=\"Unhealthy\","
                                     "injected=\"true\""),
            std::string::npos)
      << m.prometheus_text();

  publish_gpu_health(m, gpu_health(four_gpus(), {}));
  EXPECT_EQ(m.prometheus_text().find("accelerator_nvidia_gpu_health_cause{"), std::string::npos);
}

TEST(GpuHealth, GarbledFindingsAreIgnoredNotFatal) {
  HealthState s = health_state("accelerator-nvidia-ecc", Health::kUnhealthy);
  s.extra_info["gpu_findings"] =
      R"([{"gpu":-1,"health":"Unhealthy"},{"gpu":"x"},7,{"gpu":1,"health":"Worse"}])";
  s.extra_info["devices"] = "{not json";
  for (const auto& g : gpu_health(four_gpus(), {s})) EXPECT_EQ(g.health, Health::kHealthy);
}

}  // namespace
}  // namespace gpud::components
