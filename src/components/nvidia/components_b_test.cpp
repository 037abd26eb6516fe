// Rule functions of the NVIDIA (B) components over hand-built snapshots.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "components/nvidia/bad_envs.h"
#include "components/nvidia/fabric_manager.h"
#include "components/nvidia/gpm.h"
#include "components/nvidia/gsp_firmware_mode.h"
#include "components/nvidia/nvlink.h"
#include "components/nvidia/pcie.h"
#include "components/nvidia/persistence_mode.h"
#include "components/nvidia/processes.h"
#include "components/nvidia/test_snapshot.h"

namespace gpud::components {
namespace {

using testing::errored;
using testing::ok;

nvml::NvmlSnapshot snapshot(int n, const std::string& name = "NVIDIA H100 80GB HBM3") {
  nvml::NvmlSnapshot s;
  s.time = Clock::now();
  for (int i = 0; i < n; ++i) {
    nvml::GpuSnapshot g;
    g.index = static_cast<unsigned>(i);
    g.name = ok(name);
    g.uuid = ok("GPU-" + std::to_string(i));
    g.pci_bus_id = ok("0000:0" + std::to_string(i) + ":00.0");
    s.gpus.push_back(g);
  }
  return s;
}

std::vector<nvml::NvLink> links(int n, std::vector<unsigned> down = {}) {
  std::vector<nvml::NvLink> out;
  for (int i = 0; i < n; ++i) {
    nvml::NvLink l;
    l.link = static_cast<unsigned>(i);
    l.active = ok(std::find(down.begin(), down.end(), i) == down.end());
    l.replay_errors = ok<uint64_t>(0);
    l.recovery_errors = ok<uint64_t>(0);
    l.crc_flit_errors = ok<uint64_t>(0);
    out.push_back(l);
  }
  return out;
}

TEST(PersistenceMode, DisabledOnSomeGpusIsUnhealthy) {
  auto s = snapshot(2);
  s.gpus[0].persistence_mode = ok(true);
  s.gpus[1].persistence_mode = ok(false);
  auto v = evaluate_persistence_mode(s);
  EXPECT_EQ(v.result.health(), Health::kUnhealthy);
  EXPECT_EQ(v.result.states[0].reason, "GPU-1 persistence mode supported but not enabled");
  ASSERT_EQ(v.disabled.size(), 1U);
  EXPECT_FALSE(v.result.states[0].suggested_actions.has_value());
}

TEST(PersistenceMode, AllDisabledSaysAll) {
  auto s = snapshot(8);
  for (auto& g : s.gpus) g.persistence_mode = ok(false);
  EXPECT_EQ(evaluate_persistence_mode(s).result.states[0].reason,
            "all 8 GPU(s) disabled persistence mode");
}

TEST(PersistenceMode, NotSupportedIsNotApplicable) {
  auto v = evaluate_persistence_mode(snapshot(1));
  EXPECT_EQ(v.result.health(), Health::kHealthy);
  EXPECT_NE(v.result.states[0].reason.find("not applicable"), std::string::npos);
  EXPECT_TRUE(v.result.states[0].extra_info.count("data"));
}

TEST(GspFirmwareMode, ReportsVersionAndNotSupported) {
  auto s = snapshot(2);
  s.gpus[0].gsp.enabled = ok(true);
  s.gpus[0].gsp.version = ok(std::string("550.54.15"));
  auto r = evaluate_gsp_firmware_mode(s);
  EXPECT_EQ(r.health(), Health::kHealthy);
  EXPECT_EQ(r.states[0].reason, "GSP firmware enabled on 1/2 GPU(s)");
  EXPECT_NE(r.detail.find("550.54.15"), std::string::npos);
  EXPECT_EQ(evaluate_gsp_firmware_mode(snapshot(1)).states[0].reason,
            "GSP firmware mode not supported (not applicable)");
}

TEST(Gpm, SupportBaselineAndSampledValues) {
  auto s = snapshot(2);
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

TEST(Processes, BadEnvVarIsDegradedNamingPidAndVariable) {
  auto s = snapshot(1);
  s.gpus[0].processes = ok(std::vector<nvml::Process>{{42, 1 << 20}, {43, 0}});
  std::map<uint32_t, std::optional<ProcInfo>> procs;
  procs[42] = ProcInfo{{"python", "train.py"}, {"CUDA_PROFILE"}};  // 43 vanished
  auto r = evaluate_processes(s, procs, 0);
  EXPECT_EQ(r.health(), Health::kDegraded);
  EXPECT_NE(r.states[0].reason.find("pid 42"), std::string::npos);
  EXPECT_NE(r.states[0].reason.find("CUDA_PROFILE"), std::string::npos);
  auto data = nlohmann::json::parse(r.states[0].extra_info.at("data"));
  EXPECT_EQ(data["running_total"], 2);
  EXPECT_EQ(data["gpus"][0]["processes"].size(), 1U);
}

TEST(Processes, GenericErrorsUnhealthyAfterFiveChecks) {
  auto s = snapshot(1);
  s.gpus[0].processes = errored<std::vector<nvml::Process>>();
  EXPECT_TRUE(processes_have_error(s));
  auto r4 = evaluate_processes(s, {}, 4);
  EXPECT_EQ(r4.health(), Health::kHealthy);
  EXPECT_NE(r4.states[0].reason.find("4/5"), std::string::npos);
  EXPECT_EQ(evaluate_processes(s, {}, 5).health(), Health::kUnhealthy);
}

TEST(Processes, EnvironBlockParsing) {
  std::string block("A=1\0CUDA_ENABLE_COREDUMP_ON_EXCEPTION=1\0CUDA_PROFILEX=1\0", 54);
  EXPECT_EQ(bad_env_vars_in_environ(block),
            std::vector<std::string>{"CUDA_ENABLE_COREDUMP_ON_EXCEPTION"});
}

TEST(Processes, ReadsProcThroughHostRoot) {
  auto root = std::filesystem::temp_directory_path() / ("gpud-procs-" + std::to_string(getpid()));
  std::filesystem::create_directories(root / "proc/77");
  std::ofstream(root / "proc/77/cmdline") << std::string("python\0x.py\0", 12);
  std::ofstream(root / "proc/77/environ") << std::string("COMPUTE_PROFILE=1\0", 18);
  host::HostFs fs(root.string());
  auto info = read_proc_info(fs, 77);
  ASSERT_TRUE(info);
  EXPECT_EQ(info->cmdline, (std::vector<std::string>{"python", "x.py"}));
  EXPECT_EQ(info->bad_env_vars, std::vector<std::string>{"COMPUTE_PROFILE"});
  EXPECT_FALSE(read_proc_info(fs, 78));
  std::filesystem::remove_all(root);
}

TEST(BadEnvs, EnvironmentFileAndSystemdDefaults) {
  auto a = bad_envs_in_environment_file(
      "# comment\nPATH=/usr/bin\nexport CUDA_PROFILE=1\nCUDA_AUTO_BOOST=\"0\"\n",
      "/etc/environment");
  ASSERT_EQ(a.size(), 2U);
  EXPECT_EQ(a[0], (BadEnvFinding{"CUDA_PROFILE", "1", "/etc/environment"}));
  EXPECT_EQ(a[1].value, "0");
  auto b = bad_envs_in_systemd_conf(
      "[Manager]\nDefaultEnvironment=A=1 \"OPENCL_PROFILE=on x\" NSIGHT_CUDA_DEBUGGER=1\n",
      "s.conf");
  ASSERT_EQ(b.size(), 2U);
  EXPECT_EQ(b[0], (BadEnvFinding{"OPENCL_PROFILE", "on x", "s.conf"}));
  EXPECT_EQ(b[1].variable, "NSIGHT_CUDA_DEBUGGER");
}

TEST(BadEnvs, FindingIsDegradedNamingVariableAndPlace) {
  auto r = evaluate_bad_envs({{"CUDA_PROFILE", "1", "gpud environment"}});
  EXPECT_EQ(r.health(), Health::kDegraded);
  EXPECT_EQ(r.states[0].reason,
            "bad CUDA environment variables set: CUDA_PROFILE set in gpud environment");
  EXPECT_EQ(evaluate_bad_envs({}).health(), Health::kHealthy);
}

TEST(BadEnvs, CollectsThroughHostRoot) {
  auto root = std::filesystem::temp_directory_path() / ("gpud-badenv-" + std::to_string(getpid()));
  std::filesystem::create_directories(root / "etc/systemd/system.conf.d");
  std::ofstream(root / "etc/environment") << "CUDA_COREDUMP_FILE=/tmp/x\n";
  std::ofstream(root / "etc/systemd/system.conf.d/10-cuda.conf")
      << "[Manager]\nDefaultEnvironment=CUDA_DEVICE_WAITS_ON_EXCEPTION=1\n";
  char e1[] = "CUDA_INJECTION64_PATH=/x.so";
  char* env[] = {e1, nullptr};
  auto f = collect_bad_envs(host::HostFs(root.string()), env);
  ASSERT_EQ(f.size(), 3U);
  EXPECT_EQ(f[0].where, "/etc/environment");
  EXPECT_EQ(f[1].where, "/etc/systemd/system.conf.d/10-cuda.conf");
  EXPECT_EQ(f[2].where, "gpud environment");
  std::filesystem::remove_all(root);
}

TEST(Nvlink, InactiveLinkWithoutExpectationIsDegraded) {
  auto s = snapshot(2);
  s.gpus[0].nvlinks = ok(links(18, {3, 7}));
  s.gpus[1].nvlinks = ok(links(18));
  auto r = evaluate_nvlink(s, 0, {});
  EXPECT_EQ(r.health(), Health::kDegraded);
  EXPECT_EQ(r.states[0].reason, "GPU 0 (0000:00:00.0): link(s) 3, 7 inactive");
}

TEST(Nvlink, ExpectationViolatedIsUnhealthy) {
  auto s = snapshot(2);
  s.gpus[0].nvlinks = ok(links(18, {3}));
  s.gpus[1].nvlinks = ok(links(18));
  auto r = evaluate_nvlink(s, 2, {});
  EXPECT_EQ(r.health(), Health::kUnhealthy);
  EXPECT_EQ(r.states[0].reason.rfind(
                "nvlink threshold violated: require >=2 GPUs with all links active; got 1", 0),
            0U);
  EXPECT_EQ(evaluate_nvlink(s, 1, {}).health(), Health::kHealthy);
}

TEST(Nvlink, NotSupportedIsNotApplicable) {
  auto r = evaluate_nvlink(snapshot(1), 0, {});
  EXPECT_EQ(r.health(), Health::kHealthy);
  EXPECT_EQ(r.states[0].reason, "NVLink not supported (not applicable)");
}

std::vector<nvml::P2PPair> pairs(int gpus, int status) {
  std::vector<nvml::P2PPair> out;
  for (int a = 0; a < gpus; ++a)
    for (int b = a + 1; b < gpus; ++b) {
      nvml::P2PPair p;
      p.a = static_cast<unsigned>(a);
      p.b = static_cast<unsigned>(b);
      p.status = ok(status);
      out.push_back(p);
    }
  return out;
}

TEST(Nvlink, NoP2PPairOnAnNvlinkSystemIsUnhealthy) {
  auto s = snapshot(4);
  for (auto& g : s.gpus) g.nvlinks = ok(links(18));
  s.nvlink_p2p = pairs(4, nvml::NVML_P2P_STATUS_OK);
  auto r = evaluate_nvlink(s, 0, {});
  EXPECT_EQ(r.health(), Health::kHealthy);
  EXPECT_NE(r.detail.find("3/3"), std::string::npos) << r.detail;
  EXPECT_NE(r.states[0].extra_info.at("data").find("\"pairs_ok\":6"), std::string::npos);

  s.nvlink_p2p = pairs(4, nvml::NVML_P2P_STATUS_NOT_SUPPORTED);
  r = evaluate_nvlink(s, 0, {});
  EXPECT_EQ(r.health(), Health::kUnhealthy);
  EXPECT_EQ(r.states[0].reason,
            "no GPU pairs report NVLink P2P connectivity on 4-GPU NVLink-capable system");
  EXPECT_FALSE(r.states[0].suggested_actions);  // an expected refusal, links all active
  // An unknown status, or an inactive link, asks for a reboot.
  s.nvlink_p2p = pairs(4, nvml::NVML_P2P_STATUS_UNKNOWN);
  r = evaluate_nvlink(s, 0, {});
  ASSERT_TRUE(r.states[0].suggested_actions);
  EXPECT_EQ(r.states[0].suggested_actions->repair_actions[0], RepairAction::kRebootSystem);
  s.nvlink_p2p = pairs(4, nvml::NVML_P2P_STATUS_NOT_SUPPORTED);
  s.gpus[2].nvlinks = ok(links(18, {5}));
  EXPECT_TRUE(evaluate_nvlink(s, 0, {}).states[0].suggested_actions);

  // One good pair is enough; a pair not probed (error) leaves the rule out.
  s.gpus[2].nvlinks = ok(links(18));
  s.nvlink_p2p[3].status = ok(nvml::NVML_P2P_STATUS_OK);
  EXPECT_EQ(evaluate_nvlink(s, 0, {}).health(), Health::kHealthy);
  s.nvlink_p2p = pairs(4, nvml::NVML_P2P_STATUS_NOT_SUPPORTED);
  s.nvlink_p2p[0].status = errored<int>();
  EXPECT_EQ(evaluate_nvlink(s, 0, {}).health(), Health::kHealthy);
  // A product without NVLink fabric (PCIe card): no expectation.
  auto pcie = snapshot(2, "NVIDIA H100 PCIe");
  for (auto& g : pcie.gpus) g.nvlinks = ok(links(18));
  pcie.nvlink_p2p = pairs(2, nvml::NVML_P2P_STATUS_NOT_SUPPORTED);
  EXPECT_EQ(evaluate_nvlink(pcie, 0, {}).health(), Health::kHealthy);
}

TEST(Nvlink, PostRxDetectFailureNeedsReboot) {
  auto s = snapshot(1);
  s.gpus[0].nvlinks = ok(links(18));
  Event e;
  e.name = std::string(kNvlinkPostRxDetectEvent);
  e.message = "boot ID: x";
  auto r = evaluate_nvlink(s, 0, {e});
  EXPECT_EQ(r.health(), Health::kUnhealthy);
  ASSERT_TRUE(r.states[0].suggested_actions);
  EXPECT_EQ(r.states[0].suggested_actions->repair_actions[0], RepairAction::kRebootSystem);
}

TEST(Pcie, ReplayBudgetPerLane) {
  using std::chrono::seconds;
  EXPECT_EQ(pcie_replay_budget(5, 16, seconds(60)), 31U);
  EXPECT_EQ(pcie_replay_budget(4, 16, seconds(60)), 16U);
  EXPECT_EQ(pcie_replay_budget(9, 1, seconds(60)), 4U);  // capped at Gen6
}

nvml::PcieLink link(uint32_t gen, uint32_t max_gen, uint32_t width, uint32_t max_width,
                    uint32_t replay) {
  nvml::PcieLink p;
  p.gen_current = ok(gen);
  p.gen_max = ok(max_gen);
  p.width_current = ok(width);
  p.width_max = ok(max_width);
  p.replay_counter = ok(replay);
  return p;
}

TEST(Pcie, NarrowLinkIsDegraded) {
  auto s = snapshot(1);
  s.gpus[0].pcie = link(5, 5, 8, 16, 0);
  auto r = evaluate_pcie(s, {});
  EXPECT_EQ(r.health(), Health::kDegraded);
  EXPECT_EQ(r.states[0].reason, "GPU 0 (0000:00:00.0): PCIe link width x8 below max x16");
}

TEST(Pcie, LowGenOnlyMattersWhenBusy) {
  auto s = snapshot(1);
  s.gpus[0].pcie = link(1, 5, 16, 16, 0);
  EXPECT_EQ(evaluate_pcie(s, {}).health(), Health::kHealthy);
  s.gpus[0].utilization = ok(nvml::Utilization{50, 10});
  EXPECT_EQ(evaluate_pcie(s, {}).health(), Health::kDegraded);
}

TEST(Pcie, ReplayGrowthAboveBudgetIsDegraded) {
  auto s = snapshot(1);
  s.gpus[0].pcie = link(5, 5, 16, 16, 100);
  std::map<std::string, PcieReplaySample> prev = {
      {"GPU-0", {50, s.time - std::chrono::seconds(60)}}};
  auto r = evaluate_pcie(s, prev);
  EXPECT_EQ(r.health(), Health::kDegraded);
  EXPECT_NE(r.states[0].reason.find("grew by 50"), std::string::npos);
  prev["GPU-0"].counter = 80;  // 20 <= 31
  EXPECT_EQ(evaluate_pcie(s, prev).health(), Health::kHealthy);
}

nvml::FabricInfo fabric(uint8_t state, uint32_t mask = 0, uint8_t summary = 1) {
  nvml::FabricInfo f;
  f.state = state;
  f.health_mask = mask;
  f.health_summary = summary;
  return f;
}

TEST(FabricManager, FabricStateIssuesAreUnhealthy) {
  auto s = snapshot(2);
  for (auto& g : s.gpus) g.nvlinks = ok(links(18));
  s.gpus[0].fabric = ok(fabric(nvml::NVML_GPU_FABRIC_STATE_COMPLETED));
  s.gpus[1].fabric = ok(fabric(nvml::NVML_GPU_FABRIC_STATE_IN_PROGRESS));
  auto r = evaluate_fabric_manager(s, {});
  EXPECT_EQ(r.health(), Health::kUnhealthy);
  EXPECT_NE(r.states[0].reason.find("GPU GPU-1: state=In Progress"), std::string::npos);
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

  auto s = snapshot(2);
  s.gpus[0].fabric = ok(fabric(nvml::NVML_GPU_FABRIC_STATE_COMPLETED, 4u << 8));
  s.gpus[1].fabric = ok(fabric(nvml::NVML_GPU_FABRIC_STATE_COMPLETED));
  auto r = evaluate_fabric_manager(s, FabricManagerProbe{8, true, true});
  EXPECT_EQ(r.health(), Health::kUnhealthy);
  EXPECT_NE(r.states[0].reason.find("incorrect configuration: no partition"), std::string::npos)
      << r.states[0].reason;
}

// What a lone H200 (passed through to a VM) answered on a real driver (580.159.04): fabric info
// succeeds with state Not Supported. No fabric there, so nothing to check.
TEST(FabricManager, NoFabricMeansFabricStateIsNotChecked) {
  auto s = snapshot(1, "NVIDIA H200");
  s.gpus[0].fabric = ok(fabric(nvml::NVML_GPU_FABRIC_STATE_NOT_SUPPORTED, 0, 0));
  auto r = evaluate_fabric_manager(s, FabricManagerProbe{0, false, false});
  EXPECT_EQ(r.health(), Health::kHealthy) << r.states[0].reason;
  EXPECT_EQ(r.states[0].reason,
            "single GPU, fabric state not checked; NVSwitch not detected, skipping fabric manager "
            "check");
  // Two GPUs, no NVSwitch, no active NVLink (PCIe-only board): not checked either.
  s = snapshot(2, "NVIDIA H200");
  for (auto& g : s.gpus) {
    g.fabric = ok(fabric(nvml::NVML_GPU_FABRIC_STATE_NOT_SUPPORTED, 0, 0));
    g.nvlinks = ok(links(4, {0, 1, 2, 3}));
  }
  r = evaluate_fabric_manager(s, FabricManagerProbe{0, false, false});
  EXPECT_EQ(r.health(), Health::kHealthy) << r.states[0].reason;
  EXPECT_NE(r.states[0].reason.find("no NVSwitch or active NVLink"), std::string::npos);
  // The same GPUs behind NVSwitches: Not Supported is now a fault, as in GPUd.
  r = evaluate_fabric_manager(s, FabricManagerProbe{4, true, true});
  EXPECT_EQ(r.health(), Health::kUnhealthy);
  EXPECT_NE(r.states[0].reason.find("state=Not Supported"), std::string::npos);
  // A fabric that has not come up: no NVSwitch seen, every link down, but the GPUs report a
  // fabric state of their own (Not Started). Checked, and Unhealthy.
  for (auto& g : s.gpus) g.fabric = ok(fabric(nvml::NVML_GPU_FABRIC_STATE_NOT_STARTED, 0, 0));
  EXPECT_TRUE(nvlink_fabric_present(s, FabricManagerProbe{0, false, false}));
  r = evaluate_fabric_manager(s, FabricManagerProbe{0, false, false});
  EXPECT_EQ(r.health(), Health::kUnhealthy);
  EXPECT_NE(r.states[0].reason.find("state=Not Started"), std::string::npos) << r.states[0].reason;
  for (auto& g : s.gpus) g.fabric = ok(fabric(nvml::NVML_GPU_FABRIC_STATE_NOT_SUPPORTED, 0, 0));
  // An active NVLink without a visible NVSwitch (GB200 trays) also counts as a fabric.
  s.gpus[1].nvlinks = ok(links(4));
  EXPECT_TRUE(nvlink_fabric_present(s, FabricManagerProbe{0, false, false}));
  EXPECT_EQ(evaluate_fabric_manager(s, FabricManagerProbe{std::nullopt, false, false}).health(),
            Health::kUnhealthy);
}

TEST(FabricManager, ServiceCheckOnlyWithNvSwitches) {
  auto s = snapshot(2);
  for (auto& g : s.gpus) g.fabric = ok(fabric(nvml::NVML_GPU_FABRIC_STATE_COMPLETED));
  FabricManagerProbe none{0, false, false};
  EXPECT_EQ(evaluate_fabric_manager(s, none).health(), Health::kHealthy);
  FabricManagerProbe missing{4, false, false};
  auto r = evaluate_fabric_manager(s, missing);
  EXPECT_EQ(r.health(), Health::kUnhealthy);
  EXPECT_NE(r.states[0].reason.find("nv-fabricmanager executable not found"), std::string::npos);
  FabricManagerProbe closed{4, true, false};
  EXPECT_NE(evaluate_fabric_manager(s, closed).states[0].reason.find("not active"),
            std::string::npos);
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
