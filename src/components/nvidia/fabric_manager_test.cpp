// Rules of accelerator-nvidia-fabric-manager over hand-built snapshots (no NVML).
#include "components/nvidia/fabric_manager.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "components/nvidia/test_snapshot.h"

namespace gpud::components {
namespace {

using namespace testing;

nvml::FabricInfo fabric(uint8_t state, uint32_t mask = 0, uint8_t summary = 1) {
  nvml::FabricInfo f;
  f.state = state;
  f.health_mask = mask;
  f.health_summary = summary;
  return f;
}

TEST(FabricManager, FabricStateIssuesAreUnhealthy) {
  auto s = identity_only_snapshot(2);
  for (auto& g : s.gpus) g.nvlinks = ok(nvlinks(18));
  s.gpus[0].fabric = ok(fabric(nvml::NVML_GPU_FABRIC_STATE_COMPLETED));
  s.gpus[1].fabric = ok(fabric(nvml::NVML_GPU_FABRIC_STATE_IN_PROGRESS));
  auto v = evaluate_fabric_manager(s, {});
  EXPECT_EQ(v.health(), Health::kUnhealthy);
  ASSERT_EQ(v.findings_for(1).size(), 1U);
  EXPECT_TRUE(v.findings_for(0).empty());
  EXPECT_EQ(v.gpus[1].data["state"], "In Progress");
  EXPECT_EQ(v.gpus[1].cells[1], "In Progress");
  s.gpus[1].fabric = ok(fabric(nvml::NVML_GPU_FABRIC_STATE_COMPLETED, 0,
                               nvml::NVML_GPU_FABRIC_HEALTH_SUMMARY_LIMITED_CAPACITY));
  EXPECT_EQ(evaluate_fabric_manager(s, {}).health(), Health::kUnhealthy);
}

// healthMask layout (nvml.h): 2-bit fields at shifts 0, 2, 4, 6 (1 = true, 2 = false) and a 4-bit
// incorrect-configuration field at shift 8 (1 = none, 2.. = the reason).
TEST(FabricManager, HealthMaskFieldsDecode) {
  nvml::FabricInfo f;
  f.health_mask = 0b10'10'10'10 | (1u << 8);  // everything false, configuration fine
  EXPECT_FALSE(f.health_degraded_bandwidth());
  EXPECT_FALSE(f.health_route_recovery_in_progress());
  EXPECT_FALSE(f.health_route_unhealthy());
  EXPECT_FALSE(f.health_access_timeout_recovery());
  EXPECT_EQ(f.health_incorrect_configuration(), "");
  f.health_mask = 0b01'10'10'10;
  EXPECT_TRUE(f.health_access_timeout_recovery());
  EXPECT_FALSE(f.health_degraded_bandwidth());
  f.health_mask = 0b10'01'10'10;
  EXPECT_TRUE(f.health_route_unhealthy());
  f.health_mask = 0b10'10'01'10;
  EXPECT_TRUE(f.health_route_recovery_in_progress());
  f.health_mask = 0b10'10'10'01;
  EXPECT_TRUE(f.health_degraded_bandwidth());
  f.health_mask = 5u << 8;
  EXPECT_EQ(f.health_incorrect_configuration(), "incorrect configuration: insufficient NVLinks");
  f.health_mask = 0;  // not supported anywhere
  EXPECT_FALSE(f.health_degraded_bandwidth());
  EXPECT_EQ(f.health_incorrect_configuration(), "");

  auto s = identity_only_snapshot(2);
  s.gpus[0].fabric = ok(fabric(nvml::NVML_GPU_FABRIC_STATE_COMPLETED, 4u << 8));
  s.gpus[1].fabric = ok(fabric(nvml::NVML_GPU_FABRIC_STATE_COMPLETED));
  auto v = evaluate_fabric_manager(s, FabricManagerProbe{8, true, true});
  EXPECT_EQ(v.health(), Health::kUnhealthy);
  EXPECT_EQ(v.gpus[0].data["health"]["incorrect_configuration"],
            "incorrect configuration: no partition");
  EXPECT_EQ(v.findings_for(0).size(), 1U);
}

// What a lone H200 (passed through to a VM) answered on a real driver (580.159.04): fabric info
// succeeds with state Not Supported. No fabric there, so nothing to check.
TEST(FabricManager, NoFabricMeansFabricStateIsNotChecked) {
  auto s = identity_only_snapshot(1, "NVIDIA H200");
  s.gpus[0].fabric = ok(fabric(nvml::NVML_GPU_FABRIC_STATE_NOT_SUPPORTED, 0, 0));
  auto v = evaluate_fabric_manager(s, FabricManagerProbe{0, false, false});
  EXPECT_EQ(v.health(), Health::kHealthy);
  ASSERT_EQ(v.findings.size(), 2U);  // two notes: the state's and the service's
  EXPECT_EQ(v.findings[0].reason, "single GPU, fabric state not checked");
  EXPECT_EQ(v.findings[1].reason, "NVSwitch not detected, skipping fabric manager check");
  EXPECT_EQ(v.data["fabric_state_checked"], false);
  EXPECT_TRUE(v.columns.empty());
  // Two GPUs, no NVSwitch, no active NVLink (PCIe-only board): not checked either.
  s = identity_only_snapshot(2, "NVIDIA H200");
  for (auto& g : s.gpus) {
    g.fabric = ok(fabric(nvml::NVML_GPU_FABRIC_STATE_NOT_SUPPORTED, 0, 0));
    g.nvlinks = ok(nvlinks(4, {0, 1, 2, 3}));
  }
  v = evaluate_fabric_manager(s, FabricManagerProbe{0, false, false});
  EXPECT_EQ(v.health(), Health::kHealthy);
  EXPECT_EQ(v.findings[0].reason, "no NVSwitch or active NVLink, fabric state not checked");
  // The same GPUs behind NVSwitches: Not Supported is now a fault, as in GPUd.
  v = evaluate_fabric_manager(s, FabricManagerProbe{4, true, true});
  EXPECT_EQ(v.health(), Health::kUnhealthy);
  EXPECT_EQ(v.findings_for(0).size(), 1U);
  EXPECT_EQ(v.gpus[0].data["state"], "Not Supported");
  // A fabric that has not come up: no NVSwitch seen, every link down, but the GPUs report a
  // fabric state of their own (Not Started). Checked, and Unhealthy.
  for (auto& g : s.gpus) g.fabric = ok(fabric(nvml::NVML_GPU_FABRIC_STATE_NOT_STARTED, 0, 0));
  EXPECT_TRUE(nvlink_fabric_present(s, FabricManagerProbe{0, false, false}));
  v = evaluate_fabric_manager(s, FabricManagerProbe{0, false, false});
  EXPECT_EQ(v.health(), Health::kUnhealthy);
  EXPECT_EQ(v.gpus[1].data["state"], "Not Started");
  for (auto& g : s.gpus) g.fabric = ok(fabric(nvml::NVML_GPU_FABRIC_STATE_NOT_SUPPORTED, 0, 0));
  // An active NVLink without a visible NVSwitch (GB200 trays) also counts as a fabric.
  s.gpus[1].nvlinks = ok(nvlinks(4));
  EXPECT_TRUE(nvlink_fabric_present(s, FabricManagerProbe{0, false, false}));
  EXPECT_EQ(evaluate_fabric_manager(s, FabricManagerProbe{std::nullopt, false, false}).health(),
            Health::kUnhealthy);
}

TEST(FabricManager, ServiceCheckOnlyWithNvSwitches) {
  auto s = identity_only_snapshot(2);
  for (auto& g : s.gpus) g.fabric = ok(fabric(nvml::NVML_GPU_FABRIC_STATE_COMPLETED));
  FabricManagerProbe none{0, false, false};
  EXPECT_EQ(evaluate_fabric_manager(s, none).health(), Health::kHealthy);
  FabricManagerProbe missing{4, false, false};
  auto v = evaluate_fabric_manager(s, missing);
  EXPECT_EQ(v.health(), Health::kUnhealthy);
  EXPECT_EQ(v.data["fabric_manager_found"], false);
  EXPECT_EQ(v.findings.back().health, Health::kUnhealthy);  // the service's part
  FabricManagerProbe closed{4, true, false};
  v = evaluate_fabric_manager(s, closed);
  EXPECT_EQ(v.health(), Health::kUnhealthy);
  EXPECT_EQ(v.data["fabric_manager_active"], false);
  FabricManagerProbe up{4, true, true};
  EXPECT_EQ(evaluate_fabric_manager(s, up).health(), Health::kHealthy);
  // Undetectable NVSwitches: an installed nv-fabricmanager makes the check apply.
  FabricManagerProbe unknown{std::nullopt, true, false};
  EXPECT_EQ(evaluate_fabric_manager(s, unknown).health(), Health::kUnhealthy);
}

TEST(FabricManager, CountsNvSwitchesInSysfs) {
  auto root = std::filesystem::temp_directory_path() / ("gpud-nvsw-" + std::to_string(getpid()));
  for (auto [dev, cls] : {std::pair{"0000:05:00.0", "0x068000"}, {"0000:18:00.0", "0x030200"}}) {
    std::filesystem::create_directories(root / "sys/bus/pci/devices" / dev);
    std::ofstream(root / "sys/bus/pci/devices" / dev / "vendor") << "0x10de\n";
    std::ofstream(root / "sys/bus/pci/devices" / dev / "class") << cls << "\n";
  }
  EXPECT_EQ(count_nvswitches(host::HostFs(root.string())), 1);
  EXPECT_EQ(count_nvswitches(host::HostFs((root / "nope").string())), std::nullopt);
  std::filesystem::remove_all(root);
}

TEST(FabricManager, ClosedPortDoesNotAnswer) {
  EXPECT_FALSE(tcp_port_answers(1, std::chrono::milliseconds(200)));
}

}  // namespace
}  // namespace gpud::components
