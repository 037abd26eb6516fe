#include "components/nvidia/gpu_health.h"

#include <gtest/gtest.h>

#include "components/nvidia/info.h"
#include "components/nvidia/nvidia_component.h"
#include "components/nvidia/verdict.h"
#include "nvml/source.h"
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
  xid.findings.push_back(
      Finding::about(Subject::gpu_at("0000:5D:00"), Health::kUnhealthy, "Xid 79 on 0000:5d:00"));
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
  hung.findings.push_back(Finding::about(Subject::every_gpu(), Health::kUnhealthy, hung.reason));
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
  xid.findings.push_back(Finding::about(Subject::gpu_at("0000:2a:00.0"), Health::kUnhealthy,
                                        "Xid 79", RepairAction::kRebootSystem));
  HealthState ecc = health_state("accelerator-nvidia-ecc", Health::kUnhealthy, "GPU 3 ECC");
  ecc.findings.push_back(
      Finding::about(Subject::gpu(3, "GPU-3", ""), Health::kUnhealthy, "GPU 3 ECC"));
  ecc.suggested_actions = SuggestedActions{"reset", {RepairAction::kRebootSystem}};
  HealthState temp = health_state("accelerator-nvidia-temperature", Health::kUnhealthy);
  temp.findings.push_back(Finding::about(Subject::gpu(2, "", ""), Health::kUnhealthy, "hot"));
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
  xid.findings.push_back(Finding::about(Subject::gpu_at("0000:2a:00.0"), Health::kUnhealthy,
                                        "XID 79 GPU has fallen off the bus",
                                        RepairAction::kRebootSystem));
  HealthState hot = health_state("accelerator-nvidia-temperature", Health::kDegraded);
  const std::string long_reason = std::string(kGpuHealthCauseReasonBytes - 1, 'x') + "\xc3\xa9";
  hot.findings.push_back(
      Finding::about(Subject::gpu(1, "GPU-1", "0000:2a:00.0"), Health::kDegraded, long_reason));
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
  xid.findings.at(0).reason = "XID 79 (injected)";
  xid.findings.at(0).injected = true;
  publish_gpu_health(m, gpu_health(four_gpus(), {xid}));
  EXPECT_NE(m.prometheus_text().find("accelerator_nvidia_gpu_health_cause{component=\"accelerator-"
                                     "nvidia-error-xid\",gpu=\"1\",health=\"Unhealthy\","
                                     "injected=\"true\""),
            std::string::npos)
      << m.prometheus_text();

  publish_gpu_health(m, gpu_health(four_gpus(), std::vector<HealthState>{}));
  EXPECT_EQ(m.prometheus_text().find("accelerator_nvidia_gpu_health_cause{"), std::string::npos);
}

// A finding about the host, an NVSwitch or a GPU the snapshot does not have, and data rows that are
// not a GPU's, touch no GPU.
TEST(GpuHealth, FindingsAboutOtherSubjectsTouchNoGpu) {
  HealthState s = health_state("accelerator-nvidia-ecc", Health::kUnhealthy);
  s.findings.push_back(Finding::about(Subject::host(), Health::kUnhealthy, "host"));
  s.findings.push_back(
      Finding::about(Subject::nvswitch_at("0000:18:00.0"), Health::kUnhealthy, "SXid"));
  s.findings.push_back(
      Finding::about(Subject::gpu(9, "GPU-9", "0000:99:00.0"), Health::kUnhealthy, "GPU 9"));
  s.findings.push_back(
      Finding::about(Subject::gpu_at("0000:77:00.0"), Health::kUnhealthy, "Xid elsewhere"));
  s.data = {{"gpus", nlohmann::json::array({7, {{"index", -1}, {"x", 1}}, {{"index", "0"}}})}};
  for (const auto& g : gpu_health(four_gpus(), {s})) {
    EXPECT_EQ(g.health, Health::kHealthy) << g.index;
    EXPECT_TRUE(g.values.empty()) << g.values;
  }
}

// A GPU lost: the owner's finding is the GPU's cause; another component that could not check it
// says so in blocked_by, naming the owner, and is no cause. A hung driver: the owner's own "not
// checked" (Initializing) is every GPU's cause, the others' are blocked_by.
TEST(GpuHealth, WhatBlockedAComponentIsListedNotCounted) {
  nvml::NvmlSnapshot snap = four_gpus();
  snap.gpus[2].lost = true;
  snap.gpus[2].fault_call = "nvmlDeviceGetName";
  snap.gpus[2].fault_error = "GPU is lost";
  HealthState owner = render_verdict(kNvmlFaultOwner, evaluate_info(snap)).states[0];
  CheckResult ecc = single_state("accelerator-nvidia-ecc", Health::kHealthy, "no ECC errors");
  mark_not_checked(ecc, unreachable_gpus(snap));
  auto gpus = gpu_health(snap, {owner, ecc.states[0]});
  ASSERT_EQ(gpus[2].causes.size(), 1U);
  EXPECT_EQ(gpus[2].causes[0].component, kNvmlFaultOwner);
  ASSERT_EQ(gpus[2].blocked_by.size(), 1U);
  EXPECT_EQ(gpus[2].blocked_by[0].component, "accelerator-nvidia-ecc");
  EXPECT_EQ(gpus[2].blocked_by[0].owner, kNvmlFaultOwner);
  EXPECT_EQ(gpus[2].blocked_by[0].reason, "GPU 2 (0000:3a:00.0) lost");
  EXPECT_TRUE(gpus[1].blocked_by.empty());
  auto j = to_json(gpus);
  EXPECT_EQ(j[2]["blocked_by"][0]["owner"], "accelerator-nvidia-info");
  EXPECT_EQ(j[1]["blocked_by"], nlohmann::json::array());

  NvidiaPreambleInput in;
  in.status = nvml::NvmlStatus::kReady;
  in.owner = true;
  Result<std::shared_ptr<const nvml::NvmlSnapshot>> hung =
      make_error("NVML is not answering: no reply for 1.2 s", nvml::kNotAnsweringErrorCode);
  HealthState owner_hung = nvidia_preamble(kNvmlFaultOwner, in, hung)->states[0];
  in.owner = false;
  HealthState ecc_hung = nvidia_preamble("accelerator-nvidia-ecc", in, hung)->states[0];
  for (const auto& g : gpu_health(four_gpus(), {owner_hung, ecc_hung})) {
    EXPECT_EQ(g.health, Health::kInitializing) << g.index;
    ASSERT_EQ(g.causes.size(), 1U);
    EXPECT_EQ(g.causes[0].component, kNvmlFaultOwner);
    ASSERT_EQ(g.blocked_by.size(), 1U);
    EXPECT_EQ(g.blocked_by[0].component, "accelerator-nvidia-ecc");
  }

  // Past the deadline: every GPU Unhealthy by the owner, and only the GPU whose read hung has the
  // owner's row saying so.
  in.owner = true;
  const std::string report = "GPU 2: nvmlDeviceGetPowerUsage did not return within 10 s";
  in.hang = nvml::HangReport{report, "nvmlDeviceGetPowerUsage", 2, "", ""};
  HealthState owner_timeout =
      nvidia_preamble(kNvmlFaultOwner, in, make_error(report, nvml::kTimeoutErrorCode))->states[0];
  for (const auto& g : gpu_health(four_gpus(), {owner_timeout})) {
    EXPECT_EQ(g.health, Health::kUnhealthy) << g.index;
    if (g.index == 2)
      EXPECT_EQ(g.values,
                (nlohmann::json{
                    {kNvmlFaultOwner, {{"state", "hung"}, {"call", "nvmlDeviceGetPowerUsage"}}}}));
    else
      EXPECT_EQ(g.values, nlohmann::json::object()) << g.index;
  }
}

// Each GPU carries every component's row for it (the values the verdicts judged), without the
// identity keys.
TEST(GpuHealth, EachGpuCarriesTheComponentsRowsForIt) {
  NvidiaVerdict temp;
  temp.columns = {"TEMP"};
  for (const auto& g : four_gpus().gpus) {
    nvml::Field<unsigned int> t;
    t.value = 40 + g.index;
    t.status = nvml::FieldStatus::kOk;
    temp.gpus.emplace_back(g).field("temperature_c", t);
  }
  HealthState s = render_verdict("accelerator-nvidia-temperature", temp).states[0];
  auto gpus = gpu_health(four_gpus(), {s});
  EXPECT_EQ(gpus[3].values,
            (nlohmann::json{{"accelerator-nvidia-temperature", {{"temperature_c", 43}}}}));
  EXPECT_EQ(to_json(gpus)[0]["values"]["accelerator-nvidia-temperature"]["temperature_c"], 40);
  // Without the values (the metrics' per-scrape refresh): the same GPUs, no rows copied.
  auto bare = gpu_health(four_gpus(), {s}, GpuValues::kWithout);
  ASSERT_EQ(bare.size(), gpus.size());
  for (const auto& g : bare) EXPECT_TRUE(g.values.empty()) << g.index;

  // Rows without an index (persistence mode, NVLink) are matched by UUID, else by bus id.
  HealthState pm = health_state("accelerator-nvidia-persistence-mode", Health::kHealthy);
  pm.data = {
      {"gpus", nlohmann::json::array({{{"uuid", "GPU-2"}, {"persistence_mode_enabled", true}},
                                      {{"bus_id", "0000:5D:00.0"}, {"links", 18}}})}};
  gpus = gpu_health(four_gpus(), {pm});
  EXPECT_EQ(gpus[2].values["accelerator-nvidia-persistence-mode"]["persistence_mode_enabled"],
            true);
  EXPECT_EQ(gpus[3].values["accelerator-nvidia-persistence-mode"]["links"], 18);
  EXPECT_TRUE(gpus[0].values.empty());
}

}  // namespace
}  // namespace gpud::components
