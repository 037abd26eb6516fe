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

// A fabric still training right after boot or a fabric manager start is Initializing with the time
// it has had; past the grace it is the reference's Unhealthy; other issues stay Unhealthy.
TEST(FabricManager, TrainingWithinTheGraceIsInitializingThenUnhealthy) {
  auto s = identity_only_snapshot(2, "NVIDIA H100 80GB HBM3");
  for (auto& g : s.gpus) g.nvlinks = ok(nvlinks(18));
  s.gpus[0].fabric = ok(fabric(nvml::NVML_GPU_FABRIC_STATE_COMPLETED));
  s.gpus[1].fabric = ok(fabric(nvml::NVML_GPU_FABRIC_STATE_IN_PROGRESS));
  FabricManagerProbe p{8, true, true};
  p.training_grace = std::chrono::seconds(300);
  p.training_elapsed = std::chrono::seconds(42);
  auto v = evaluate_fabric_manager(s, p);
  EXPECT_EQ(v.health(), Health::kInitializing);
  ASSERT_EQ(v.findings_for(1).size(), 1U);
  EXPECT_EQ(v.findings_for(1)[0].reason,
            "GPU " + s.gpus[1].uuid.value +
                ": fabric still training (state In Progress) 42 s after boot or the fabric "
                "manager's start; Unhealthy if not Completed by 300 s");
  EXPECT_EQ(v.gpus[1].data["training_elapsed_seconds"], 42);
  EXPECT_EQ(v.gpus[1].cells[4], "ok");

  p.training_elapsed = std::chrono::seconds(300);
  v = evaluate_fabric_manager(s, p);
  EXPECT_EQ(v.health(), Health::kUnhealthy);
  EXPECT_NE(v.findings_for(1)[0].reason.find("with unhealthy fabric state: GPU " +
                                             s.gpus[1].uuid.value + ": state=In Progress"),
            std::string::npos)
      << v.findings_for(1)[0].reason;
  // Unknown elapsed time (no boot time read): no grace.
  p.training_elapsed.reset();
  EXPECT_EQ(evaluate_fabric_manager(s, p).health(), Health::kUnhealthy);
  // A grace of 0 is GPUd's behaviour.
  p.training_elapsed = std::chrono::seconds(1);
  p.training_grace = std::chrono::seconds(0);
  EXPECT_EQ(evaluate_fabric_manager(s, p).health(), Health::kUnhealthy);

  // While GPU 1 trains, GPU 0's degraded bandwidth is still Unhealthy, and the reason names the
  // product once, at the Unhealthy finding.
  p.training_grace = std::chrono::seconds(300);
  s.gpus[0].fabric = ok(fabric(nvml::NVML_GPU_FABRIC_STATE_COMPLETED, 0b10'10'10'01));
  v = evaluate_fabric_manager(s, p);
  EXPECT_EQ(v.health(), Health::kUnhealthy);
  EXPECT_EQ(
      v.findings_for(0)[0].reason.rfind("NVIDIA H100 80GB HBM3 with unhealthy fabric state", 0), 0U)
      << v.findings_for(0)[0].reason;
  EXPECT_EQ(v.findings_for(1)[0].health, Health::kInitializing);
}

// GPUd's exception: a fabric manager that logged NV_WARN_NOTHING_TO_DO (nothing to manage) and
// stopped is no fault while that is recent.
TEST(FabricManager, NothingToDoExcusesAStoppedService) {
  auto s = identity_only_snapshot(2);
  for (auto& g : s.gpus) g.fabric = ok(fabric(nvml::NVML_GPU_FABRIC_STATE_COMPLETED));
  FabricManagerProbe closed{4, true, false};
  EXPECT_EQ(evaluate_fabric_manager(s, closed).health(), Health::kUnhealthy);
  closed.nothing_to_do_at = Clock::from_time_t(1764493982);
  auto v = evaluate_fabric_manager(s, closed);
  EXPECT_EQ(v.health(), Health::kHealthy);
  EXPECT_EQ(v.findings.back().reason,
            "fabric manager found but not active: it logged NV_WARN_NOTHING_TO_DO at "
            "2025-11-30T09:13:02Z (nothing to manage), not a fault");
  EXPECT_EQ(v.data["nothing_to_do_at"], "2025-11-30T09:13:02Z");
  // It does not excuse a missing binary.
  FabricManagerProbe missing{4, false, false};
  missing.nothing_to_do_at = closed.nothing_to_do_at;
  EXPECT_EQ(evaluate_fabric_manager(s, missing).health(), Health::kUnhealthy);
}

// /proc/<pid>/stat's starttime (field 22, clock ticks after boot) of the fabric manager, whose comm
// is cut to 15 characters; the oldest of two wins, other processes are not it.
TEST(FabricManager, ProcessStartTimeFromProcStat) {
  auto root = std::filesystem::temp_directory_path() / ("gpud-fmproc-" + std::to_string(getpid()));
  const long hz = ::sysconf(_SC_CLK_TCK);
  auto write_stat = [&](int pid, const std::string& comm, long ticks) {
    std::filesystem::create_directories(root / "proc" / std::to_string(pid));
    std::ofstream(root / "proc" / std::to_string(pid) / "stat")
        << pid << " (" << comm << ") S 1 " << pid << " " << pid
        << " 0 -1 4194560 100 0 0 0 1 2 0 0 20 0 4 0 " << ticks
        << " 1000000 100 18446744073709551615 0 0 0 0 0 0 0 0 0 0 0 0 17 1 0 0 0 0 0\n";
  };
  write_stat(2105, "nv-fabricmanage", 120 * hz);
  write_stat(2106, "nv-fabricmanage", 300 * hz);
  write_stat(7, "bash", 1 * hz);
  const TimePoint boot = Clock::from_time_t(1764493000);
  auto t = process_start_time(host::HostFs(root.string()), "nv-fabricmanage", boot);
  ASSERT_TRUE(t);
  EXPECT_EQ(Clock::to_time_t(*t), 1764493120);
  EXPECT_FALSE(process_start_time(host::HostFs(root.string()), "dcgm", boot));
  std::filesystem::remove_all(root);
}

TEST(FabricManager, ClosedPortDoesNotAnswer) {
  EXPECT_FALSE(tcp_port_answers(1, std::chrono::milliseconds(200)));
}

}  // namespace
}  // namespace gpud::components
