// The NVIDIA components over every scenario of the fake libnvidia-ml (testing/fixtures/nvml/),
// loaded through the real loader.
#include <gtest/gtest.h>
#include <stdlib.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <memory>
#include <set>
#include <thread>

#include "components/nvidia/bad_envs.h"
#include "components/nvidia/clock_speed.h"
#include "components/nvidia/ecc.h"
#include "components/nvidia/fabric_manager.h"
#include "components/nvidia/gpm.h"
#include "components/nvidia/gpu_counts.h"
#include "components/nvidia/gsp_firmware_mode.h"
#include "components/nvidia/hw_slowdown.h"
#include "components/nvidia/info.h"
#include "components/nvidia/memory.h"
#include "components/nvidia/nvlink.h"
#include "components/nvidia/pcie.h"
#include "components/nvidia/persistence_mode.h"
#include "components/nvidia/power.h"
#include "components/nvidia/processes.h"
#include "components/nvidia/remapped_rows.h"
#include "components/nvidia/retired_pages.h"
#include "components/nvidia/temperature.h"
#include "components/nvidia/test_result.h"
#include "components/nvidia/utilization.h"
#include "components/registry.h"
#include "components/self/gpud.h"
#include "core/json.h"
#include "core/registry.h"
#include "core/time_util.h"
#include "nvml/source.h"
#include "store/database.h"
#include "store/event_store.h"
#include "testing/memory_event_log.h"

namespace gpud::components {
namespace {

using namespace std::chrono_literals;
using testing::action_of;
using testing::contains;

std::string fixture_dir() { return std::string(GPUD_SOURCE_DIR) + "/testing/fixtures/nvml/"; }

// The components that report each GPU's own state: identity, count, temperature, power, clocks,
// HW slowdown, ECC, remapped rows, retired pages, memory and utilization.
const std::vector<std::string>& gpu_state_components() {
  static const std::vector<std::string> kNames = {
      "accelerator-nvidia-info",          "accelerator-nvidia-gpu-counts",
      "accelerator-nvidia-temperature",   "accelerator-nvidia-power",
      "accelerator-nvidia-clock-speed",   "accelerator-nvidia-hw-slowdown",
      "accelerator-nvidia-ecc",           "accelerator-nvidia-remapped-rows",
      "accelerator-nvidia-retired-pages", "accelerator-nvidia-memory",
      "accelerator-nvidia-utilization"};
  return kNames;
}

std::unique_ptr<Component> make_gpu_state_component(const std::string& name,
                                                    const ComponentContext& ctx) {
  static const std::map<std::string,
                        std::function<std::unique_ptr<Component>(const ComponentContext&)>>
      kMake = {
          {"accelerator-nvidia-info", [](auto& c) { return std::make_unique<InfoComponent>(c); }},
          {"accelerator-nvidia-gpu-counts",
           [](auto& c) { return std::make_unique<GpuCountsComponent>(c); }},
          {"accelerator-nvidia-temperature",
           [](auto& c) { return std::make_unique<TemperatureComponent>(c); }},
          {"accelerator-nvidia-power", [](auto& c) { return std::make_unique<PowerComponent>(c); }},
          {"accelerator-nvidia-clock-speed",
           [](auto& c) { return std::make_unique<ClockSpeedComponent>(c); }},
          {"accelerator-nvidia-hw-slowdown",
           [](auto& c) { return std::make_unique<HwSlowdownComponent>(c); }},
          {"accelerator-nvidia-ecc", [](auto& c) { return std::make_unique<EccComponent>(c); }},
          {"accelerator-nvidia-remapped-rows",
           [](auto& c) { return std::make_unique<RemappedRowsComponent>(c); }},
          {"accelerator-nvidia-retired-pages",
           [](auto& c) { return std::make_unique<RetiredPagesComponent>(c); }},
          {"accelerator-nvidia-memory",
           [](auto& c) { return std::make_unique<GpuMemoryComponent>(c); }},
          {"accelerator-nvidia-utilization",
           [](auto& c) { return std::make_unique<UtilizationComponent>(c); }},
      };
  return kMake.at(name)(ctx);
}

// The GPU-state components in one daemon-like (or scan) setup over one scenario.
struct GpuStateRig {
  // `scenario`: a fixture's name, or an absolute path.
  explicit GpuStateRig(const std::string& scenario, bool scan_mode = false,
                       std::chrono::milliseconds deadline = 5s, int gpu_count = 0,
                       std::chrono::milliseconds max_age = 5s,
                       const std::string& host_root = "nonexistent-root") {
    setenv("FAKE_NVML_SCENARIO",
           (scenario.front() == '/' ? scenario : fixture_dir() + scenario).c_str(), 1);
    db = store::Database::open_in_memory().value();
    events = std::make_unique<store::EventStore>(*db);
    config.gpu_count = gpu_count;
    config.threshold_celsius_slowdown_margin = 0;
    config.host_root = std::string(GPUD_SOURCE_DIR) + "/testing/fixtures/" + host_root;
    source = std::make_unique<nvml::NvidiaSource>(GPUD_FAKE_NVML, deadline, max_age);
    source->open();
    ctx.config = &config;
    ctx.events = events.get();
    ctx.metrics = &metrics;
    ctx.scan_mode = scan_mode;
    ctx.nvidia = source.get();
    for (const auto& n : gpu_state_components()) components[n] = make_gpu_state_component(n, ctx);
  }
  CheckResult check(const std::string& name) { return components.at(name)->check(); }
  Component& at(const std::string& name) { return *components.at(name); }

  std::unique_ptr<store::Database> db;
  std::unique_ptr<store::EventStore> events;
  MetricRegistry metrics;
  Config config;
  std::unique_ptr<nvml::NvidiaSource> source;
  ComponentContext ctx;
  std::map<std::string, std::unique_ptr<Component>> components;
};

struct Expect {
  Health health = Health::kHealthy;
  std::string reason_part;  // "" : anything
  std::optional<RepairAction> action;
};

// Expected GPU-state verdicts per scenario; components not named are Healthy without an action.
const std::map<std::string, std::map<std::string, Expect>>& expectations() {
  static const std::map<std::string, std::map<std::string, Expect>> kExpect = {
      {"h100x8-healthy.json", {}},
      {"a100x8-healthy.json", {}},
      {"h100x8-row-remap-pending.json",
       {{"accelerator-nvidia-remapped-rows",
         {Health::kUnhealthy, "GPU 2 (0000:3a:00.0) needs reset", RepairAction::kRebootSystem}},
        {"accelerator-nvidia-ecc",
         {Health::kUnhealthy, "GPU 2 (0000:3a:00.0) has 1 volatile uncorrectable",
          RepairAction::kRebootSystem}}}},
      {"h100x8-row-remap-failed.json",
       {{"accelerator-nvidia-remapped-rows",
         {Health::kUnhealthy, "GPU 5 (0000:ab:00.0) qualifies for RMA",
          RepairAction::kHardwareInspection}}}},
      {"h100x8-hw-slowdown.json",
       {{"accelerator-nvidia-hw-slowdown", {Health::kHealthy, "GPU 6 (0000:ba:00.0)", {}}}}},
      {"h100x8-gpu-lost.json", {}},  // see GpuLostIsOneFindingOfTheInfoComponent
      {"h100x8-hbm-overheat.json",
       {{"accelerator-nvidia-temperature",
         {Health::kDegraded, "HBM temperature anomalies: GPU 4 (0000:9a:00.0)", {}}}}},
      {"h100x8-nvlink-down.json", {}},
      {"h100x8-persistence-off.json", {}},
      {"h100x8-fabric-degraded.json", {}},
      {"h100x8-hung-driver.json", {}},  // see HungDriverIsOneFindingThatNamesTheCall
      {"rtx4090x1-no-ecc.json",
       {{"accelerator-nvidia-ecc", {Health::kHealthy, "ECC not supported", {}}},
        {"accelerator-nvidia-remapped-rows",
         {Health::kHealthy, "does not support row remapping", {}}}}},
      {"h100x8-ecc-volatile-uncorrectable.json",
       {{"accelerator-nvidia-ecc",
         {Health::kUnhealthy,
          "GPU 3 (0000:5d:00.0) has 2 volatile uncorrectable ECC error(s) in "
          "dram",
          RepairAction::kRebootSystem}}}},
      {"v100x8-retired-pages-pending.json",
       {{"accelerator-nvidia-retired-pages",
         {Health::kUnhealthy, "GPU 5 (0000:ab:00.0) has pages pending retirement",
          RepairAction::kRebootSystem}},
        {"accelerator-nvidia-remapped-rows",
         {Health::kHealthy, "does not support row remapping", {}}}}},
      {"v100x8-retired-pages-limit.json",
       {{"accelerator-nvidia-retired-pages",
         {Health::kUnhealthy, "GPU 2 (0000:3a:00.0) has 65 retired pages",
          RepairAction::kHardwareInspection}},
        {"accelerator-nvidia-remapped-rows",
         {Health::kHealthy, "does not support row remapping", {}}}}},
  };
  return kExpect;
}

std::vector<std::string> scenario_files() {
  std::vector<std::string> out;
  for (const auto& e : std::filesystem::directory_iterator(fixture_dir()))
    if (e.path().extension() == ".json") out.push_back(e.path().filename().string());
  std::sort(out.begin(), out.end());
  return out;
}

TEST(GpuStateScenarios, EveryScenarioGivesTheExpectedVerdicts) {
  auto files = scenario_files();
  ASSERT_GE(files.size(), 12U);
  for (const auto& file : files) {
    if (file == "h100x8-gpu-lost.json" || file == "h100x8-hung-driver.json" ||
        file == "h100x8-gpu-reset-required.json")
      continue;
    SCOPED_TRACE(file);
    GpuStateRig rig(file);
    ASSERT_EQ(rig.source->status(), nvml::NvmlStatus::kReady) << rig.source->message();
    auto known = expectations().find(file);
    for (const auto& name : gpu_state_components()) {
      SCOPED_TRACE(name);
      CheckResult r = rig.check(name);
      ASSERT_EQ(r.states.size(), 1U);
      EXPECT_EQ(r.states[0].component, name);
      EXPECT_FALSE(r.states[0].reason.empty());
      EXPECT_EQ(r.states[0].data.is_null(), false);
      if (known == expectations().end()) continue;  // a scenario another component added
      Expect want;
      if (auto it = known->second.find(name); it != known->second.end()) want = it->second;
      EXPECT_EQ(r.health(), want.health) << r.summary();
      EXPECT_NE(r.summary().find(want.reason_part), std::string::npos) << r.summary();
      EXPECT_EQ(action_of(r), want.action) << r.summary();
    }
  }
}

// Every NVIDIA component's typed findings about one GPU name a GPU of the snapshot: its index, and
// its UUID and bus id where the finding has them (issue #31). Findings about every GPU (NVML's own
// faults) and the host are not about one GPU.
TEST(GpuStateScenarios, EveryNvidiaFindingNamesAGpuOfTheSnapshot) {
  size_t checked = 0;
  for (const auto& file : scenario_files()) {
    if (file == "h100x8-hung-driver.json") continue;  // no snapshot: every finding is every GPU's
    SCOPED_TRACE(file);
    GpuStateRig rig(file);
    auto snap = rig.source->snapshot();
    ASSERT_TRUE(snap.ok()) << snap.error().message;
    Registry registry;
    ASSERT_TRUE(register_all(registry, rig.ctx).ok());
    for (gpud::Component* c : registry.supported()) {
      if (!c->name().starts_with("accelerator-nvidia-")) continue;
      for (const HealthState& s : c->check().states)
        for (const Finding& f : s.findings) {
          if (f.subject.kind != Subject::Kind::kGpu || f.subject.is_every_gpu()) continue;
          SCOPED_TRACE(s.component + ": " + f.reason);
          ASSERT_TRUE(f.subject.index.has_value());
          const auto& gpus = (*snap)->gpus;
          auto g = std::find_if(gpus.begin(), gpus.end(),
                                [&](const auto& x) { return x.index == *f.subject.index; });
          ASSERT_NE(g, gpus.end());
          EXPECT_EQ(f.subject.uuid, g->uuid.value);
          EXPECT_EQ(f.subject.bus_id, g->pci_bus_id.value);
          ++checked;
        }
    }
  }
  // Not vacuous: the fault scenarios have findings about single GPUs.
  EXPECT_GE(checked, 10U);
}

// The state's not_checked as the wire says it.
std::string not_checked(const CheckResult& r) {
  auto extra = wire_extra_info(r.states.at(0));
  auto it = extra.find("not_checked");
  return it == extra.end() ? "" : it->second;
}

// One lost GPU is one finding: accelerator-nvidia-info's, with REBOOT_SYSTEM; every other
// component judges the seven GPUs that answer, stays Healthy, and lists GPU 3 as not checked.
TEST(GpuStateScenarios, GpuLostIsOneFindingOfTheInfoComponent) {
  GpuStateRig rig("h100x8-gpu-lost.json");
  for (const auto& name : gpu_state_components()) {
    CheckResult r = rig.check(name);
    if (name == "accelerator-nvidia-info") {
      EXPECT_EQ(r.health(), Health::kUnhealthy) << r.summary();
      EXPECT_TRUE(contains(r.summary(),
                           "GPU 3 (bus id unknown) is lost: nvmlDeviceGetName "
                           "answered 'GPU is lost'"))
          << r.summary();
      EXPECT_EQ(action_of(r), RepairAction::kRebootSystem);
      continue;
    }
    EXPECT_EQ(r.health(), Health::kHealthy) << name << ": " << r.summary();
    EXPECT_EQ(action_of(r), std::nullopt) << name;
    if (name == "accelerator-nvidia-gpu-counts") continue;  // NVML still enumerates GPU 3
    EXPECT_TRUE(contains(r.summary(), "(not checked: GPU 3 lost, see accelerator-nvidia-info)"))
        << name << ": " << r.summary();
    EXPECT_EQ(not_checked(r), R"(["GPU 3 lost, see accelerator-nvidia-info"])") << name;
  }
  // No series of GPU 3 (node_exporter's rule: what failed vanishes), the others' stay; NVML up.
  std::string text = rig.metrics.prometheus_text();
  EXPECT_FALSE(contains(text, "gpu=\"3\"")) << text;
  EXPECT_TRUE(contains(text, "accelerator_nvidia_temperature_current_celsius{gpu=\"2\""));
  EXPECT_TRUE(
      contains(text, "accelerator_nvidia_nvml_up{gpud_component=\"accelerator-nvidia-info\"} 1\n"));
}

// A GPU that needs a reset (NVML answers RESET_REQUIRED to its queries, its identity still reads)
// is the same one finding: accelerator-nvidia-info names it with bus id, UUID, serial and the call;
// the others judge the seven that answer and list GPU 5 as not checked.
TEST(GpuStateScenarios, AGpuThatNeedsAResetIsOneFindingWithItsIdentity) {
  GpuStateRig rig("h100x8-gpu-reset-required.json");
  for (const auto& name : gpu_state_components()) {
    CheckResult r = rig.check(name);
    if (name == "accelerator-nvidia-info") {
      EXPECT_EQ(r.health(), Health::kUnhealthy) << r.summary();
      EXPECT_TRUE(contains(r.summary(), "GPU 5 (0000:ab:00.0, GPU-")) << r.summary();
      EXPECT_TRUE(contains(r.summary(), ") requires a reset: ")) << r.summary();
      EXPECT_TRUE(contains(r.summary(), "answered 'GPU requires reset'")) << r.summary();
      EXPECT_TRUE(contains(r.summary(), ", serial ")) << r.summary();
      EXPECT_EQ(action_of(r), RepairAction::kRebootSystem);
      auto data = r.states[0].data;
      EXPECT_EQ(data["gpus"][5]["state"], "reset_required");
      EXPECT_EQ(data["gpus_answering"], 7);
      continue;
    }
    EXPECT_EQ(r.health(), Health::kHealthy) << name << ": " << r.summary();
    EXPECT_EQ(action_of(r), std::nullopt) << name;
    if (name == "accelerator-nvidia-gpu-counts") continue;  // NVML still enumerates GPU 5
    EXPECT_EQ(not_checked(r),
              R"(["GPU 5 (0000:ab:00.0) requires reset, see accelerator-nvidia-info"])")
        << name;
  }
  std::string text = rig.metrics.prometheus_text();
  EXPECT_FALSE(contains(text, "accelerator_nvidia_temperature_current_celsius{gpu=\"5\"")) << text;
  EXPECT_TRUE(contains(text, "accelerator_nvidia_temperature_current_celsius{gpu=\"4\""));
}

// A scenario file the fake NVML follows while loaded: use() replaces it atomically with a fixture
// and waits until the fake can have seen the change (it looks at most every 100 ms).
struct LiveScenario {
  explicit LiveScenario(const std::string& tag)
      : path(std::filesystem::temp_directory_path() /
             ("gpud-" + tag + "-" + std::to_string(getpid()) + ".json")) {}
  ~LiveScenario() { std::filesystem::remove(path); }
  void use(const char* fixture) {
    auto tmp = path;
    tmp += ".tmp";
    std::filesystem::copy_file(fixture_dir() + fixture, tmp,
                               std::filesystem::copy_options::overwrite_existing);
    std::filesystem::rename(tmp, path);
    std::this_thread::sleep_for(150ms);
  }
  std::filesystem::path path;
};

// A GPU lost while the daemon runs keeps the identity it had: the finding names its bus id, UUID
// and serial from the last good snapshot.
TEST(GpuStateScenarios, AGpuLostMidRunIsNamedWithItsLastKnownIdentity) {
  LiveScenario scenario("lost");
  scenario.use("h100x8-healthy.json");
  GpuStateRig rig(scenario.path.string(), false, 5s, 0, 0ms);
  EXPECT_EQ(rig.check("accelerator-nvidia-info").health(), Health::kHealthy);
  scenario.use("h100x8-gpu-lost.json");
  CheckResult r = rig.check("accelerator-nvidia-info");
  EXPECT_EQ(r.health(), Health::kUnhealthy);
  EXPECT_TRUE(contains(r.summary(),
                       "GPU 3 (0000:5d:00.0, GPU-1d2e3f40-5a6b-7c8d-9e0f-1a2b3c4d5e03, serial "
                       "1652323001003) is lost: nvmlDeviceGetName answered 'GPU is lost'"))
      << r.summary();
  auto data = r.states[0].data;
  EXPECT_EQ(data["gpus"][3]["state"], "lost");
  EXPECT_EQ(data["gpus"][3]["identity_from_last_good"], true);
  EXPECT_EQ(data["gpus"][3]["fault"]["call"], "nvmlDeviceGetName");
  EXPECT_EQ(data["gpus_answering"], 7);
  CheckResult t = rig.check("accelerator-nvidia-temperature");
  EXPECT_EQ(t.health(), Health::kHealthy);
  EXPECT_TRUE(contains(t.summary(), "not checked: GPU 3 (0000:5d:00.0) lost")) << t.summary();
}

// Every health change of NVML's fault owner is an event (issue #31): a GPU lost and its return,
// each with the GPU's index, bus id and UUID; a restart records nothing it already recorded.
TEST(GpuStateScenarios, AGpuLostAndItsReturnAreEventsOfTheOwnerRecordedOnce) {
  LiveScenario scenario("lost-events");
  scenario.use("h100x8-healthy.json");
  GpuStateRig rig(scenario.path.string(), false, 5s, 0, 0ms);
  auto owner_events = [&rig] {
    return rig.events->query("accelerator-nvidia-info", TimePoint{}, Clock::now() + 1h).value();
  };
  rig.check("accelerator-nvidia-info");
  EXPECT_TRUE(owner_events().empty()) << "healthy from the start: nothing changed";
  scenario.use("h100x8-gpu-lost.json");
  rig.check("accelerator-nvidia-info");
  rig.check("accelerator-nvidia-info");
  auto ev = owner_events();
  ASSERT_EQ(ev.size(), 1U);
  EXPECT_EQ(ev[0].name, kGpuLostEvent);
  EXPECT_EQ(ev[0].type, EventType::kCritical);
  EXPECT_EQ(ev[0].extra_info["gpu_index"], 3);
  EXPECT_EQ(ev[0].extra_info["device_bus_id"], "0000:5d:00.0");
  EXPECT_EQ(ev[0].extra_info["device_uuid"], "GPU-1d2e3f40-5a6b-7c8d-9e0f-1a2b3c4d5e03");
  EXPECT_TRUE(contains(ev[0].message, "GPU 3 (0000:5d:00.0)")) << ev[0].message;
  // A restart: a new owner over the same store reads back what is recorded.
  InfoComponent restarted(rig.ctx);
  restarted.check();
  EXPECT_EQ(owner_events().size(), 1U);
  scenario.use("h100x8-healthy.json");
  rig.check("accelerator-nvidia-info");
  ev = owner_events();
  ASSERT_EQ(ev.size(), 2U);
  EXPECT_EQ(ev[0].name, kGpuRecoveredEvent);
  EXPECT_EQ(ev[0].type, EventType::kInfo);
  EXPECT_EQ(ev[0].extra_info["device_bus_id"], "0000:5d:00.0");
}

// The lost GPU's readings go (a value that could not be read is absent), but its identity series
// stays with the identity it last answered with: the Xid counter read from the kernel log, and
// dcgm-exporter's DCGM_FI_DEV_XID_ERRORS built on it, still name the GPU.
TEST(GpuStateScenarios, ALostGpuKeepsItsIdentitySeriesAndLosesItsReadings) {
  LiveScenario scenario("lost-series");
  scenario.use("h100x8-healthy.json");
  GpuStateRig rig(scenario.path.string(), false, 5s, 0, 0ms);
  for (const auto& name : gpu_state_components()) rig.check(name);
  const std::string gpu3_info =
      "accelerator_nvidia_gpu_info{driver_version=\"550.54.15\",gpu=\"3\",gpud_component="
      "\"accelerator-nvidia-info\",name=\"NVIDIA H100 80GB HBM3\",nvml_pci_bus_id="
      "\"00000000:5D:00.0\",pci_bus_id=\"0000:5d:00.0\",uuid=\"GPU-1d2e3f40-5a6b-7c8d-9e0f-"
      "1a2b3c4d5e03\"} 1\n";
  std::string before = rig.metrics.prometheus_text();
  ASSERT_TRUE(contains(before, gpu3_info)) << before;
  ASSERT_TRUE(contains(before, "accelerator_nvidia_power_total_energy_milli_joules{gpu=\"3\""));
  scenario.use("h100x8-gpu-lost.json");
  for (const auto& name : gpu_state_components()) rig.check(name);
  std::string after = rig.metrics.prometheus_text();
  EXPECT_TRUE(contains(after, gpu3_info)) << after;
  for (const char* reading : {"accelerator_nvidia_temperature_current_celsius{gpu=\"3\"",
                              "accelerator_nvidia_power_current_usage_milli_watts{gpu=\"3\"",
                              "accelerator_nvidia_power_total_energy_milli_joules{gpu=\"3\""})
    EXPECT_FALSE(contains(after, reading)) << reading;
  EXPECT_TRUE(contains(after, "accelerator_nvidia_power_total_energy_milli_joules{gpu=\"2\""));
}

// The dcgm-exporter sources through the fake library's real entry points: GPM's graphics, SM,
// DRAM and tensor utilisation in percent and its PCIe rates turned from MiB/s to bytes per second,
// and NVML's total energy in millijoules.
TEST(GpuStateScenarios, BusyGpuServesGpmRatesAndTotalEnergy) {
  GpuStateRig rig("h100x8-busy.json", false, 5s, 0, 0ms);
  GpmComponent gpm(rig.ctx);
  rig.check("accelerator-nvidia-power");
  gpm.check();
  gpm.check();  // the first check only takes the baseline sample
  const std::string text = rig.metrics.prometheus_text();
  const std::string gpu1 =
      "{gpu=\"1\",gpud_component=\"accelerator-nvidia-gpm\",pci_bus_id=\"0000:2a:00.0\",uuid="
      "\"GPU-1d2e3f40-5a6b-7c8d-9e0f-1a2b3c4d5e01\"} ";
  for (const char* sample : {"graphics_util_percent", "sm_util_percent", "sm_occupancy_percent",
                             "any_tensor_util_percent", "dram_bw_util_percent",
                             "pcie_tx_bytes_per_second", "pcie_rx_bytes_per_second"})
    EXPECT_TRUE(contains(text, std::string("accelerator_nvidia_gpm_gpu_") + sample + gpu1))
        << sample << "\n"
        << text;
  EXPECT_TRUE(contains(text, "accelerator_nvidia_gpm_gpu_graphics_util_percent" + gpu1 + "97\n"));
  EXPECT_TRUE(contains(text, "accelerator_nvidia_gpm_gpu_dram_bw_util_percent" + gpu1 + "42.5\n"));
  EXPECT_TRUE(contains(
      text, "accelerator_nvidia_gpm_gpu_pcie_tx_bytes_per_second" + gpu1 + "1610612736\n"));
  EXPECT_TRUE(
      contains(text, "accelerator_nvidia_gpm_gpu_pcie_rx_bytes_per_second" + gpu1 + "25690112\n"));
  EXPECT_TRUE(contains(text, "# TYPE accelerator_nvidia_power_total_energy_milli_joules counter"));
  EXPECT_TRUE(
      contains(text,
               "accelerator_nvidia_power_total_energy_milli_joules{gpu=\"1\",gpud_component="
               "\"accelerator-nvidia-power\",pci_bus_id=\"0000:2a:00.0\",uuid=\"GPU-"
               "1d2e3f40-5a6b-7c8d-9e0f-1a2b3c4d5e01\"} 93500000123\n"))
      << text;
}

// A hung driver is one finding too: accelerator-nvidia-info names the GPU and the call that did
// not return; the others say they checked nothing and why, and no per-GPU value is served.
TEST(GpuStateScenarios, HungDriverIsOneFindingThatNamesTheCall) {
  GpuStateRig rig("h100x8-hung-driver.json", false, 300ms);
  const std::string report = "GPU 2: nvmlDeviceGetPowerUsage did not return within 300 ms";
  for (const auto& name : gpu_state_components()) {
    auto start = std::chrono::steady_clock::now();
    CheckResult r = rig.check(name);
    // At most one deadline (300 ms) per check, never the driver's 15 s.
    EXPECT_LT(std::chrono::steady_clock::now() - start, 1000ms) << name;
    EXPECT_EQ(r.states.at(0).error, report) << name;
    if (name == "accelerator-nvidia-info") {
      EXPECT_EQ(r.health(), Health::kUnhealthy);
      EXPECT_EQ(r.summary(), report);
      EXPECT_EQ(action_of(r), RepairAction::kRebootSystem);
      // The GPU whose call hung, marked in the owner's data (its row in /v1/gpus).
      const nlohmann::json& gpus = r.states.at(0).data.at("gpus");
      ASSERT_EQ(gpus.size(), 1U) << gpus;
      EXPECT_EQ(gpus[0].at("index"), 2);
      EXPECT_EQ(gpus[0].at("state"), "hung");
      EXPECT_EQ(gpus[0].at("call"), "nvmlDeviceGetPowerUsage");
      continue;
    }
    EXPECT_EQ(r.health(), Health::kHealthy) << name;
    EXPECT_EQ(r.summary(), "not checked: " + report + " (see accelerator-nvidia-info)");
    EXPECT_FALSE(check_succeeded(r)) << name;
  }
  std::string text = rig.metrics.prometheus_text();
  EXPECT_FALSE(contains(text, "gpu=\"0\"")) << text;
  EXPECT_TRUE(
      contains(text, "accelerator_nvidia_nvml_up{gpud_component=\"accelerator-nvidia-info\"} 0\n"));
}

// NVML not answering is one event of the owner, however many checks see it.
TEST(GpuStateScenarios, AHungDriverIsOneEventOfTheOwner) {
  GpuStateRig rig("h100x8-hung-driver.json", false, 300ms);
  for (int i = 0; i < 3; ++i) rig.check("accelerator-nvidia-info");
  auto ev = rig.events->query("accelerator-nvidia-info", TimePoint{}, Clock::now() + 1h).value();
  ASSERT_EQ(ev.size(), 1U);
  EXPECT_EQ(ev[0].name, kNvmlNotAnsweringEvent);
  EXPECT_EQ(ev[0].type, EventType::kCritical);
  EXPECT_EQ(ev[0].message, "GPU 2: nvmlDeviceGetPowerUsage did not return within 300 ms");
  // The others record nothing of it: the fault is reported once, by its owner.
  rig.check("accelerator-nvidia-temperature");
  EXPECT_TRUE(
      rig.events->query("accelerator-nvidia-temperature", TimePoint{}, Clock::now() + 1h)->empty());
}

// A driver that hangs after serving values: every per-GPU series goes (those a component sets in
// its rule, like GPM's, too), none stays at its last value, and NVML reads as down.
TEST(GpuStateScenarios, AHangMidRunLeavesNoFrozenSeries) {
  LiveScenario scenario("hang");
  scenario.use("h100x8-healthy.json");
  // The deadline must pass a healthy collection on a loaded machine: the sanitizer build (ASan,
  // UBSan and the fuzzer's coverage at -O0) makes every call of the fake several times slower.
#if defined(GPUD_SANITIZED)
  GpuStateRig rig(scenario.path.string(), false, 2s, 0, 0ms);
#else
  GpuStateRig rig(scenario.path.string(), false, 300ms, 0, 0ms);
#endif
  GpmComponent gpm(rig.ctx);
  // The `gpud` component's gpud_nvml_up has accelerator_nvidia_nvml_up's meaning: NVML answered
  // its last collection (a loaded NVML whose driver hangs is 0 in both).
  GpudProbes probes;
  ComponentContext self_ctx = rig.ctx;
  self_ctx.gpud = &probes;
  GpudComponent self(self_ctx);
  auto check_all = [&] {
    for (const auto& name : gpu_state_components()) rig.check(name);
    gpm.check();
    self.check();
  };
  check_all();
  check_all();  // GPM's values need a baseline sample first
  std::string before = rig.metrics.prometheus_text();
  ASSERT_TRUE(contains(before, "accelerator_nvidia_gpm_gpu_sm_occupancy_percent{gpu=\"0\""))
      << before;
  ASSERT_TRUE(contains(before, "accelerator_nvidia_temperature_current_celsius{gpu=\"2\""));
  EXPECT_TRUE(contains(
      before, "accelerator_nvidia_nvml_up{gpud_component=\"accelerator-nvidia-info\"} 1\n"));
  EXPECT_TRUE(contains(before, "gpud_nvml_up{gpud_component=\"gpud\"} 1\n")) << before;
  scenario.use("h100x8-hung-driver.json");
  check_all();
  std::string after = rig.metrics.prometheus_text();
  EXPECT_FALSE(contains(after, "gpu=\"")) << after;
  EXPECT_TRUE(contains(
      after, "accelerator_nvidia_nvml_up{gpud_component=\"accelerator-nvidia-info\"} 0\n"));
  ASSERT_EQ(rig.source->status(), nvml::NvmlStatus::kReady) << "NVML stays loaded";
  EXPECT_TRUE(contains(after, "gpud_nvml_up{gpud_component=\"gpud\"} 0\n")) << after;
}

// NVIDIA expected but NVML unusable: the info component (and only it) is shown and Unhealthy with
// NVML's exact error, what made GPUs expected and a suggested action; the others stay hidden.
struct NoNvmlRig {
  NoNvmlRig(const std::string& library, const std::string& scenario_body, bool pci, int gpu_count) {
    // A path of its own: the fake library re-reads a scenario path it knows at most every
    // 100 ms, so a rig made right after another on the same path read the other's scenario.
    static int rigs = 0;
    scenario = std::filesystem::temp_directory_path() /
               ("gpud-nonvml-" + std::to_string(getpid()) + "-" + std::to_string(++rigs) + ".json");
    std::ofstream(scenario) << scenario_body;
    setenv("FAKE_NVML_SCENARIO", scenario.c_str(), 1);
    config.gpu_count = gpu_count;
    config.host_root = std::string(GPUD_SOURCE_DIR) + (pci ? "/testing/fixtures/host-os/pci"
                                                           : "/testing/fixtures/nonexistent-root");
    source = std::make_unique<nvml::NvidiaSource>(library, 2s);
    source->open();
    ctx.config = &config;
    ctx.metrics = &metrics;
    ctx.nvidia = source.get();
    ctx.nvidia_pci_present = pci;
    info = std::make_unique<InfoComponent>(ctx);
    temperature = std::make_unique<TemperatureComponent>(ctx);
  }
  ~NoNvmlRig() { std::filesystem::remove(scenario); }

  std::filesystem::path scenario;
  Config config;
  MetricRegistry metrics;
  ComponentContext ctx;
  std::unique_ptr<nvml::NvidiaSource> source;
  std::unique_ptr<InfoComponent> info;
  std::unique_ptr<TemperatureComponent> temperature;
};

TEST(NvmlUnusable, DriverNotLoadedWithGpusOnTheBusIsUnhealthy) {
  NoNvmlRig rig(GPUD_FAKE_NVML, R"({"count": 8, "errors": {"nvmlInit": "DRIVER_NOT_LOADED"}})",
                true, 0);
  ASSERT_EQ(rig.source->status(), nvml::NvmlStatus::kNotFound);
  EXPECT_TRUE(rig.info->supported());
  EXPECT_FALSE(rig.temperature->supported());
  CheckResult r = rig.info->check();
  EXPECT_EQ(r.health(), Health::kUnhealthy);
  EXPECT_TRUE(contains(r.summary(),
                       "NVIDIA GPUs expected (1 NVIDIA GPU(s) on the PCI bus: 0000:3b:00.0) but "
                       "NVML is not usable: NVML not found: nvmlInit: "))
      << r.summary();
  EXPECT_TRUE(contains(r.states[0].error, "Driver Not Loaded")) << r.states[0].error;
  EXPECT_EQ(action_of(r), RepairAction::kRebootSystem);
  EXPECT_TRUE(contains(r.states[0].suggested_actions->description, "modprobe nvidia"));
  EXPECT_TRUE(contains(rig.metrics.prometheus_text(),
                       "accelerator_nvidia_nvml_up{gpud_component=\"accelerator-nvidia-info\"} 0"));
}

TEST(NvmlUnusable, MissingLibraryWithAGpuCountIsUnhealthy) {
  NoNvmlRig rig("/nonexistent/libnvidia-ml.so.1", "{}", false, 8);
  EXPECT_TRUE(rig.info->supported());
  CheckResult r = rig.info->check();
  EXPECT_EQ(r.health(), Health::kUnhealthy);
  EXPECT_TRUE(contains(r.summary(),
                       "NVIDIA GPUs expected (--gpu-count 8) but NVML is not usable: "
                       "NVML not found: "))
      << r.summary();
  EXPECT_TRUE(contains(r.summary(), "/nonexistent/libnvidia-ml.so.1")) << r.summary();
}

TEST(NvmlUnusable, NoPermissionNamesTheFix) {
  NoNvmlRig rig(GPUD_FAKE_NVML, R"({"count": 8, "errors": {"nvmlInit": "NO_PERMISSION"}})", false,
                0);
  ASSERT_EQ(rig.source->status(), nvml::NvmlStatus::kErrored);
  CheckResult r = rig.info->check();
  EXPECT_EQ(r.health(), Health::kUnhealthy);
  EXPECT_TRUE(contains(r.summary(), "Insufficient Permissions")) << r.summary();
  EXPECT_TRUE(contains(r.states[0].suggested_actions->description, "run gpud as root"));
  CheckResult t = rig.temperature->check();
  EXPECT_EQ(t.health(), Health::kHealthy);
  EXPECT_TRUE(contains(t.summary(), "not checked: NVML initialization error")) << t.summary();
}

// A driver upgraded without a reboot: NVML's library and the loaded module differ. One finding,
// NVML's own words, and the action says why a reboot.
TEST(NvmlUnusable, LibraryAndKernelModuleMismatchAsksForAReboot) {
  NoNvmlRig rig(GPUD_FAKE_NVML,
                R"({"count": 8, "errors": {"nvmlInit": "LIB_RM_VERSION_MISMATCH"}})", true, 0);
  ASSERT_EQ(rig.source->status(), nvml::NvmlStatus::kErrored);
  EXPECT_TRUE(rig.info->supported());
  CheckResult r = rig.info->check();
  EXPECT_EQ(r.health(), Health::kUnhealthy);
  EXPECT_TRUE(contains(r.summary(), "RM has detected an NVML/RM version mismatch")) << r.summary();
  EXPECT_EQ(action_of(r), RepairAction::kRebootSystem);
  EXPECT_TRUE(
      contains(r.states[0].suggested_actions->description, "driver upgraded without a reboot"));
  CheckResult t = rig.temperature->check();
  EXPECT_EQ(t.health(), Health::kHealthy);
  EXPECT_TRUE(contains(t.summary(), "not checked: ")) << t.summary();
}

TEST(NvmlUnusable, NoNvidiaAnywhereIsNotApplicable) {
  NoNvmlRig rig(GPUD_FAKE_NVML, R"({"count": 8, "errors": {"nvmlInit": "DRIVER_NOT_LOADED"}})",
                false, 0);
  EXPECT_FALSE(rig.info->supported());
  EXPECT_FALSE(rig.temperature->supported());
}

TEST(GpuStateScenarios, HwSlowdownRecordsEventsAndEscalatesAfterSixMinutes) {
  GpuStateRig rig("h100x8-hw-slowdown.json");
  auto& c = rig.at("accelerator-nvidia-hw-slowdown");
  EXPECT_EQ(c.check().health(), Health::kHealthy);
  auto ev = c.events(TimePoint::min(), Clock::now() + 1min);
  ASSERT_TRUE(ev.ok());
  ASSERT_EQ(ev->size(), 2U);  // GPU 1 and GPU 6, this minute
  std::set<std::string> messages;
  for (const auto& e : *ev) messages.insert(e.message);
  EXPECT_EQ(messages.count("GPU-1d2e3f40-5a6b-7c8d-9e0f-1a2b3c4d5e01: HW Slowdown"), 1U);
  // Five earlier minutes with events make six of the last ten.
  TimePoint now = std::chrono::time_point_cast<std::chrono::minutes>(Clock::now());
  for (int i = 1; i <= 5; ++i) {
    Event e = ev->front();
    e.time = now - std::chrono::minutes(i);
    ASSERT_TRUE(rig.events->insert(e).ok());
  }
  CheckResult r = c.check();
  EXPECT_EQ(r.health(), Health::kUnhealthy) << r.summary();
  EXPECT_EQ(action_of(r), RepairAction::kHardwareInspection);
  ASSERT_TRUE(c.set_healthy({Clock::now(), "uid:0"}).ok());
  EXPECT_EQ(c.check().health(), Health::kHealthy);
}

TEST(GpuStateScenarios, ScanJudgesOnlyTheCurrentHwSlowdownSample) {
  GpuStateRig rig("h100x8-hw-slowdown.json", /*scan_mode=*/true);
  CheckResult r = rig.check("accelerator-nvidia-hw-slowdown");
  EXPECT_EQ(r.health(), Health::kHealthy);
  EXPECT_NE(r.summary().find("GPU 1 (0000:2a:00.0): HW Slowdown"), std::string::npos)
      << r.summary();
}

TEST(GpuStateScenarios, GpuCountMismatchNeedsReboot) {
  GpuStateRig match("h100x8-healthy.json", false, 5s, 8);
  EXPECT_EQ(match.check("accelerator-nvidia-gpu-counts").health(), Health::kHealthy);
  GpuStateRig rig("rtx4090x1-no-ecc.json", false, 5s, 8);
  CheckResult r = rig.check("accelerator-nvidia-gpu-counts");
  EXPECT_EQ(r.health(), Health::kUnhealthy);
  EXPECT_NE(r.summary().find("found 1, expected 8"), std::string::npos) << r.summary();
  EXPECT_EQ(action_of(r), RepairAction::kRebootSystem);
}

TEST(GpuStateScenarios, GpuCountGaugesCompareFoundWithExpected) {
  auto value = [](const MetricRegistry& m, const std::string& name) {
    for (const auto& s : m.snapshot(0))
      if (s.name == name) return s.value;
    return -1.0;
  };
  GpuStateRig rig("rtx4090x1-no-ecc.json", false, 5s, 8);
  rig.check("accelerator-nvidia-gpu-counts");
  EXPECT_EQ(value(rig.metrics, "accelerator_nvidia_gpu_counts_found"), 1);
  EXPECT_EQ(value(rig.metrics, "accelerator_nvidia_gpu_counts_expected"), 8);
  EXPECT_EQ(value(rig.metrics, "accelerator_nvidia_gpu_counts_pci"), 0);  // no sysfs tree
  std::string text = rig.metrics.prometheus_text();
  EXPECT_NE(text.find("accelerator_nvidia_gpu_counts_found{gpud_component=\"accelerator-nvidia-"
                      "gpu-counts\"} 1\n"),
            std::string::npos)
      << text;
  // Without --gpu-count and without GPUs listed on the PCI bus there is no expected series.
  GpuStateRig unset("h100x8-healthy.json");
  unset.check("accelerator-nvidia-gpu-counts");
  EXPECT_EQ(value(unset.metrics, "accelerator_nvidia_gpu_counts_found"), 8);
  EXPECT_EQ(value(unset.metrics, "accelerator_nvidia_gpu_counts_expected"), -1);
}

// A scenario file of `count` H100s (the fake's default bus ids 18, 2a, 3a, 5d, 9a, ab, ba, db),
// removed at scope exit.
struct H100Scenario {
  explicit H100Scenario(int count)
      : path((std::filesystem::temp_directory_path() /
              ("gpud-h100x" + std::to_string(count) + "-" + std::to_string(getpid()) + ".json"))
                 .string()) {
    std::ofstream(path) << R"({"driver": {"version": "550.54.15", "nvml_version": "12.550.54.15",
      "cuda_version": 12040}, "count": )"
                        << count << R"(, "defaults": {"name": "NVIDIA H100 80GB HBM3",
      "cuda_compute_capability": [9, 0]}})";
  }
  ~H100Scenario() { std::filesystem::remove(path); }
  std::string path;
};

TEST(GpuStateScenarios, WithoutGpuCountTheGpusOnThePciBusAreExpected) {
  // 8 GPUs and 4 NVSwitches (also vendor 0x10de, class 0x0680) on the bus: 8 expected.
  GpuStateRig rig("h100x8-healthy.json", false, 5s, 0, 5s, "host-os/pci-8gpu");
  CheckResult r = rig.check("accelerator-nvidia-gpu-counts");
  EXPECT_EQ(r.health(), Health::kHealthy) << r.summary();
  EXPECT_EQ(r.states[0].reason, "nvidia gpu count 8 matches the 8 GPUs on the PCI bus");
  std::string text = rig.metrics.prometheus_text();
  EXPECT_NE(text.find("accelerator_nvidia_gpu_counts_expected{gpud_component=\"accelerator-"
                      "nvidia-gpu-counts\"} 8\n"),
            std::string::npos)
      << text;
}

TEST(GpuStateScenarios, NvmlSeeingFewerGpusThanThePciBusIsUnhealthyNamingTheMissing) {
  H100Scenario seven(7);
  GpuStateRig rig(seven.path, false, 5s, 0, 5s, "host-os/pci-8gpu");
  CheckResult r = rig.check("accelerator-nvidia-gpu-counts");
  EXPECT_EQ(r.health(), Health::kUnhealthy);
  EXPECT_NE(r.summary().find("nvidia gpu count mismatch (found 7, expected 8 on the PCI bus); "
                             "not seen by NVML: 0000:db:00.0"),
            std::string::npos)
      << r.summary();
  EXPECT_EQ(action_of(r), RepairAction::kRebootSystem);
  auto value = [&](const std::string& name) {
    for (const auto& s : rig.metrics.snapshot(0))
      if (s.name == name) return s.value;
    return -1.0;
  };
  EXPECT_EQ(value("accelerator_nvidia_gpu_counts_found"), 7);
  EXPECT_EQ(value("accelerator_nvidia_gpu_counts_expected"), 8);  // GpuCountBelowExpected fires
  // --gpu-count still decides: 7 expected, 7 found.
  GpuStateRig configured(seven.path, false, 5s, 7, 5s, "host-os/pci-8gpu");
  CheckResult c = configured.check("accelerator-nvidia-gpu-counts");
  EXPECT_EQ(c.health(), Health::kHealthy) << c.summary();
  EXPECT_EQ(c.states[0].reason, "nvidia gpu count matches the expected 7");
}

TEST(GpuStateScenarios, AGpuPassedThroughToAVmIsNotExpected) {
  // A ninth GPU bound to vfio-pci: NVML cannot see it, and it is not missing.
  GpuStateRig rig("h100x8-healthy.json", false, 5s, 0, 5s, "host-os/pci-8gpu-vfio");
  CheckResult r = rig.check("accelerator-nvidia-gpu-counts");
  EXPECT_EQ(r.health(), Health::kHealthy) << r.summary();
  auto data = r.states[0].data;
  EXPECT_EQ(data["passthrough_bus_ids"], nlohmann::json::array({"0000:e1:00.0"}));
  EXPECT_EQ(data["expected_from"], "pci");
}

TEST(GpuStateScenarios, ProductsWithoutTheFeatureHideTheComponent) {
  GpuStateRig scan("rtx4090x1-no-ecc.json", /*scan_mode=*/true);
  EXPECT_FALSE(scan.at("accelerator-nvidia-remapped-rows").supported());
  EXPECT_FALSE(scan.at("accelerator-nvidia-retired-pages").supported());
  EXPECT_TRUE(scan.at("accelerator-nvidia-ecc").supported());
  // The daemon learns it from the first check, never from an API request.
  GpuStateRig daemon("h100x8-healthy.json");
  EXPECT_TRUE(daemon.at("accelerator-nvidia-retired-pages").supported());
  daemon.check("accelerator-nvidia-retired-pages");
  EXPECT_FALSE(daemon.at("accelerator-nvidia-retired-pages").supported());
  EXPECT_TRUE(daemon.at("accelerator-nvidia-remapped-rows").supported());
  GpuStateRig v100("v100x8-retired-pages-pending.json", /*scan_mode=*/true);
  EXPECT_TRUE(v100.at("accelerator-nvidia-retired-pages").supported());
  EXPECT_FALSE(v100.at("accelerator-nvidia-remapped-rows").supported());
}

TEST(GpuStateScenarios, PrometheusTextHasEveryMetricWithGpuLabels) {
  GpuStateRig rig("h100x8-row-remap-pending.json");
  for (const auto& name : gpu_state_components()) rig.check(name);
  std::string text = rig.metrics.prometheus_text();
  for (const char* metric : {
           "accelerator_nvidia_info{",
           "accelerator_nvidia_gpu_info{",
           "accelerator_nvidia_temperature_current_celsius{",
           "accelerator_nvidia_temperature_current_hbm_celsius{",
           "accelerator_nvidia_temperature_slowdown_threshold_celsius{",
           "accelerator_nvidia_temperature_mem_max_threshold_celsius{",
           "accelerator_nvidia_temperature_slowdown_used_percent{",
           "accelerator_nvidia_temperature_mem_max_used_percent{",
           "accelerator_nvidia_temperature_margin_celsius{",
           "accelerator_nvidia_power_current_usage_milli_watts{",
           "accelerator_nvidia_power_enforced_limit_milli_watts{",
           "accelerator_nvidia_power_used_percent{",
           "accelerator_nvidia_clock_speed_graphics_mhz{",
           "accelerator_nvidia_clock_speed_memory_mhz{",
           "accelerator_nvidia_clock_speed_sm_mhz{",
           "accelerator_nvidia_clock_hw_slowdown{",
           "accelerator_nvidia_clock_hw_slowdown_thermal{",
           "accelerator_nvidia_clock_hw_slowdown_power_brake{",
           "accelerator_nvidia_ecc_aggregate_total_corrected{",
           "accelerator_nvidia_ecc_aggregate_total_uncorrected{",
           "accelerator_nvidia_ecc_volatile_total_corrected{",
           "accelerator_nvidia_ecc_volatile_total_uncorrected{",
           "accelerator_nvidia_remapped_rows_due_to_uncorrectable_errors{",
           "accelerator_nvidia_remapped_rows_due_to_correctable_errors{",
           "accelerator_nvidia_remapped_rows_remapping_pending{",
           "accelerator_nvidia_remapped_rows_remapping_failed{",
           "accelerator_nvidia_memory_total_bytes{",
           "accelerator_nvidia_memory_reserved_bytes{",
           "accelerator_nvidia_memory_used_bytes{",
           "accelerator_nvidia_memory_free_bytes{",
           "accelerator_nvidia_memory_used_percent{",
           "accelerator_nvidia_utilization_gpu_util_percent{",
           "accelerator_nvidia_utilization_memory_util_percent{",
       }) {
    EXPECT_NE(text.find(metric), std::string::npos) << metric;
  }
  EXPECT_NE(text.find("# TYPE accelerator_nvidia_ecc_volatile_total_uncorrected counter"),
            std::string::npos);
  EXPECT_NE(text.find("driver_version=\"550.54.15\""), std::string::npos);
  // Each GPU's NVML name, unsanitized (the info series' product is "NVIDIA-H100-80GB-HBM3").
  EXPECT_NE(text.find("accelerator_nvidia_gpu_info{driver_version=\"550.54.15\",gpu=\"2\","
                      "gpud_component=\"accelerator-nvidia-info\",name=\"NVIDIA H100 80GB HBM3\","
                      "nvml_pci_bus_id=\"00000000:3A:00.0\",pci_bus_id=\"0000:3a:00.0\",uuid="
                      "\"GPU-1d2e3f40-5a6b-7c8d-9e0f-1a2b3c4d5e02\"} 1"),
            std::string::npos)
      << text.substr(0, 4000);
  // GPU 2's series carry uuid, gpu and pci_bus_id; the remap uses the uncorrectable count.
  const std::string labels =
      "gpu=\"2\",gpud_component=\"accelerator-nvidia-remapped-rows\",pci_bus_id=\"0000:3a:00.0\","
      "uuid=\"GPU-1d2e3f40-5a6b-7c8d-9e0f-1a2b3c4d5e02\"}";
  EXPECT_NE(
      text.find("accelerator_nvidia_remapped_rows_due_to_uncorrectable_errors{" + labels + " 1"),
      std::string::npos)
      << text.substr(0, 4000);
  EXPECT_NE(text.find("accelerator_nvidia_remapped_rows_remapping_pending{" + labels + " 1"),
            std::string::npos);
}

using MemEventLog = testing_support::MemoryEventLog;

struct Verdict {
  Health health;
  std::string reason;
  std::vector<RepairAction> actions;
};

// Checks the components that look at what surrounds the GPUs (NVLink and PCIe links, the fabric,
// GSP firmware, GPM, persistence mode, the CUDA environment and GPU processes) once on `scenario`
// and keeps name -> verdict.
class LinksAndSetupVerdicts {
 public:
  explicit LinksAndSetupVerdicts(const std::string& scenario,
                                 std::chrono::milliseconds deadline = 5s, int expected_links = 0) {
    // An empty host root: no /proc/<pid>, no NVSwitch sysfs, no /etc files.
    root_ = std::filesystem::temp_directory_path() /
            ("gpud-links-setup-" + std::to_string(getpid()) + "-" + std::to_string(counter_++));
    std::filesystem::create_directories(root_);
    config_.host_root = root_.string();
    config_.nvlink_expected_gpus_all_links = expected_links;
    setenv("FAKE_NVML_SCENARIO",
           (std::string(GPUD_SOURCE_DIR) + "/testing/fixtures/nvml/" + scenario).c_str(), 1);
    source_ = std::make_unique<nvml::NvidiaSource>(GPUD_FAKE_NVML, deadline);
    source_->open();
    ctx_.config = &config_;
    ctx_.events = &events_;
    ctx_.metrics = &metrics_;
    ctx_.nvidia = source_.get();
    comps_.push_back(std::make_unique<BadEnvsComponent>(ctx_));
    comps_.push_back(std::make_unique<FabricManagerComponent>(ctx_));
    comps_.push_back(std::make_unique<GpmComponent>(ctx_));
    comps_.push_back(std::make_unique<GspFirmwareModeComponent>(ctx_));
    comps_.push_back(std::make_unique<NvlinkComponent>(ctx_));
    comps_.push_back(std::make_unique<PcieComponent>(ctx_));
    comps_.push_back(std::make_unique<PersistenceModeComponent>(ctx_));
    comps_.push_back(std::make_unique<ProcessesComponent>(ctx_));
    for (auto& c : comps_) {
      EXPECT_TRUE(c->supported()) << c->name();
      auto r = c->check();
      EXPECT_EQ(r.states.size(), 1U);
      const auto& s = r.states.at(0);
      EXPECT_EQ(s.component, c->name());
      Verdict v{s.health, s.reason, {}};
      if (s.suggested_actions) v.actions = s.suggested_actions->repair_actions;
      verdicts[std::string(c->name())] = v;
    }
  }
  ~LinksAndSetupVerdicts() { std::filesystem::remove_all(root_); }

  std::map<std::string, Verdict> verdicts;
  MemEventLog events_;
  MetricRegistry metrics_;

 private:
  static inline int counter_ = 0;
  std::filesystem::path root_;
  Config config_;
  ComponentContext ctx_;
  std::unique_ptr<nvml::NvidiaSource> source_;
  std::vector<std::unique_ptr<Component>> comps_;
};

void expect_all_healthy(const LinksAndSetupVerdicts& h, const std::string& scenario) {
  for (const auto& [name, v] : h.verdicts)
    EXPECT_EQ(v.health, Health::kHealthy) << scenario << " " << name << ": " << v.reason;
}

TEST(LinksAndSetupScenarios, HealthyScenariosAreHealthy) {
  for (const char* s :
       {"h100x8-healthy.json", "a100x8-healthy.json", "h100x8-row-remap-pending.json",
        "h100x8-row-remap-failed.json", "h100x8-hw-slowdown.json", "h100x8-hbm-overheat.json"}) {
    LinksAndSetupVerdicts h(s);
    expect_all_healthy(h, s);
  }
}

TEST(LinksAndSetupScenarios, H100HealthyReasonsAndMetrics) {
  LinksAndSetupVerdicts h("h100x8-healthy.json");
  EXPECT_EQ(h.verdicts["accelerator-nvidia-nvlink"].reason,
            "all NVLink links active on 8 GPU(s) (nvlink threshold not set)");
  EXPECT_EQ(h.verdicts["accelerator-nvidia-persistence-mode"].reason,
            "persistence mode enabled on 8 GPU(s)");
  EXPECT_EQ(h.verdicts["accelerator-nvidia-gsp-firmware-mode"].reason,
            "GSP firmware enabled on 8/8 GPU(s)");
  EXPECT_TRUE(contains(h.verdicts["accelerator-nvidia-fabric-manager"].reason,
                       "fabric state healthy on all GPUs"));
  std::string text = h.metrics_.prometheus_text();
  EXPECT_TRUE(contains(text, "# TYPE accelerator_nvidia_nvlink_replay_errors counter"));
  EXPECT_TRUE(contains(text, "# TYPE accelerator_nvidia_pcie_replay_errors counter"));
  EXPECT_TRUE(contains(text, "accelerator_nvidia_pcie_link_gen{"));
  EXPECT_TRUE(contains(text, "accelerator_nvidia_nvlink_feature_enabled{"));
  EXPECT_TRUE(contains(text, "accelerator_nvidia_processes_running_total{"));
  EXPECT_TRUE(contains(text, "uuid=\"GPU-"));
}

TEST(LinksAndSetupScenarios, A100HasNoFabricState) {
  LinksAndSetupVerdicts h("a100x8-healthy.json");
  EXPECT_TRUE(
      contains(h.verdicts["accelerator-nvidia-fabric-manager"].reason, "NVSwitch not detected"));
  EXPECT_FALSE(contains(h.verdicts["accelerator-nvidia-fabric-manager"].reason, "fabric state"));
}

TEST(LinksAndSetupScenarios, NvlinkDownIsDegradedOrUnhealthyWithExpectation) {
  {
    LinksAndSetupVerdicts h("h100x8-nvlink-down.json");
    auto v = h.verdicts["accelerator-nvidia-nvlink"];
    EXPECT_EQ(v.health, Health::kDegraded);
    EXPECT_TRUE(contains(v.reason, "GPU 0 (0000:18:00.0): link(s) 3, 7 inactive")) << v.reason;
    // GPUd's setNVLinkSuggestedActions: inactive links suggest a reboot.
    EXPECT_EQ(v.actions, std::vector<RepairAction>{RepairAction::kRebootSystem});
    for (const auto& [name, o] : h.verdicts) {
      if (name != "accelerator-nvidia-nvlink") {
        EXPECT_EQ(o.health, Health::kHealthy) << name;
      }
    }
    std::string text = h.metrics_.prometheus_text();
    EXPECT_TRUE(contains(text, "accelerator_nvidia_nvlink_replay_errors{gpu=\"0\"")) << text;
  }
  LinksAndSetupVerdicts h("h100x8-nvlink-down.json", 5s, 8);
  auto v = h.verdicts["accelerator-nvidia-nvlink"];
  EXPECT_EQ(v.health, Health::kUnhealthy);
  EXPECT_TRUE(contains(v.reason, "require >=8 GPUs with all links active; got 7")) << v.reason;
  EXPECT_EQ(v.actions, std::vector<RepairAction>{RepairAction::kRebootSystem});
}

TEST(LinksAndSetupScenarios, PersistenceOffIsUnhealthyWithEvents) {
  LinksAndSetupVerdicts h("h100x8-persistence-off.json");
  auto v = h.verdicts["accelerator-nvidia-persistence-mode"];
  EXPECT_EQ(v.health, Health::kUnhealthy);
  EXPECT_EQ(v.reason, "all 8 GPU(s) disabled persistence mode");
  EXPECT_EQ(v.actions, std::vector<RepairAction>{RepairAction::kCheckUserAppAndGpu});
  EXPECT_EQ(std::count_if(h.events_.events.begin(), h.events_.events.end(),
                          [](const Event& e) { return e.name == "persistence_mode_disabled"; }),
            8);
}

TEST(LinksAndSetupScenarios, FabricDegradedIsUnhealthy) {
  LinksAndSetupVerdicts h("h100x8-fabric-degraded.json");
  auto v = h.verdicts["accelerator-nvidia-fabric-manager"];
  EXPECT_EQ(v.health, Health::kUnhealthy);
  EXPECT_TRUE(contains(v.reason, "with unhealthy fabric state")) << v.reason;
  EXPECT_TRUE(contains(v.reason, "state=In Progress")) << v.reason;
  EXPECT_TRUE(contains(v.reason, "summary=Limited Capacity")) << v.reason;
  EXPECT_TRUE(contains(v.reason, "degraded bandwidth")) << v.reason;
  EXPECT_EQ(v.actions, std::vector<RepairAction>{RepairAction::kRebootSystem});
}

TEST(LinksAndSetupScenarios, GpuLostIsNotTheirFinding) {
  LinksAndSetupVerdicts h("h100x8-gpu-lost.json");
  for (const auto& [name, v] : h.verdicts) {
    EXPECT_EQ(v.health, Health::kHealthy) << name << ": " << v.reason;
    if (name == "accelerator-nvidia-bad-envs") continue;
    EXPECT_TRUE(contains(v.reason, "not checked: GPU 3 lost")) << name << ": " << v.reason;
    EXPECT_TRUE(v.actions.empty()) << name;
  }
}

TEST(LinksAndSetupScenarios, HungDriverIsNotTheirFinding) {
  auto start = std::chrono::steady_clock::now();
  LinksAndSetupVerdicts h("h100x8-hung-driver.json", 300ms);
  EXPECT_LT(std::chrono::steady_clock::now() - start, 5s);
  for (const auto& [name, v] : h.verdicts) {
    EXPECT_EQ(v.health, Health::kHealthy) << name << ": " << v.reason;
    if (name == "accelerator-nvidia-bad-envs") continue;
    EXPECT_TRUE(contains(v.reason, "not checked: GPU 2: nvmlDeviceGetPowerUsage did not return"))
        << name << ": " << v.reason;
  }
}

TEST(LinksAndSetupScenarios, ConsumerGpuMostlyNotApplicable) {
  LinksAndSetupVerdicts h("rtx4090x1-no-ecc.json");
  expect_all_healthy(h, "rtx4090x1-no-ecc.json");
  for (const char* n :
       {"accelerator-nvidia-persistence-mode", "accelerator-nvidia-gsp-firmware-mode",
        "accelerator-nvidia-gpm", "accelerator-nvidia-nvlink"})
    EXPECT_TRUE(contains(h.verdicts[n].reason, "not applicable"))
        << n << ": " << h.verdicts[n].reason;
  EXPECT_TRUE(contains(h.verdicts["accelerator-nvidia-fabric-manager"].reason,
                       "does not support fabric manager"));
  EXPECT_EQ(h.verdicts["accelerator-nvidia-processes"].reason, "1 GPU compute process(es) running");
}

// Machine info carries the NVLink fabric's identity under GPUd's names (api/v1/types.go of
// leptonai/gpud 4a8de33: clusterUUID, cliqueID, both omitted off a fabric).
TEST(NvidiaMachineInfo, FabricIdentityUnderGpudsNamesAndAbsentOffAFabric) {
  GpuStateRig h100("h100x8-healthy.json");
  nlohmann::json info = nlohmann::json::object();
  h100.source->fill_machine_info(info);
  EXPECT_EQ(info.value("clusterUUID", ""), "7d2f9a31-0c4e-4b8a-9f61-2e5d8c1b3a70") << info.dump();
  EXPECT_EQ(info.value("cliqueID", 0), 32766) << info.dump();
  // An A100 has no fabric state: neither key, even where an earlier fill had them.
  GpuStateRig a100("a100x8-healthy.json");
  a100.source->fill_machine_info(info);
  EXPECT_FALSE(info.contains("clusterUUID")) << info.dump();
  EXPECT_FALSE(info.contains("cliqueID")) << info.dump();
  EXPECT_EQ(info["gpuInfo"]["gpus"].size(), 8u);
  EXPECT_FALSE(info.contains("chassisSerial")) << "an H100 or A100 has no platform info";
}

// GPUd's chassisSerial from nvmlDeviceGetPlatformInfo (GB200/GB300 trays): the first GPU's serial,
// a full 16 bytes without a NUL read whole, bytes that are not printable dropped.
TEST(NvidiaMachineInfo, ChassisSerialFromPlatformInfo) {
  const auto path = std::filesystem::temp_directory_path() /
                    ("gpud-platform-" + std::to_string(getpid()) + ".json");
  auto scenario = nlohmann::json::parse(std::ifstream(fixture_dir() + "h100x8-healthy.json"));
  // GPU 0 reports an empty serial, GPU 1 none (NOT_SUPPORTED), GPU 2 a full one.
  scenario["gpus"] = {{"0", {{"platform", {{"chassis_serial", ""}}}}},
                      {"2", {{"platform", {{"chassis_serial", "1821425000123ABC"}, {"tray", 1}}}}}};
  std::ofstream(path) << scenario.dump();
  GpuStateRig rig(path.string());
  nlohmann::json info = nlohmann::json::object();
  rig.source->fill_machine_info(info);
  EXPECT_EQ(info.value("chassisSerial", ""), "1821425000123ABC") << info.dump();
  std::filesystem::remove(path);
}

}  // namespace
}  // namespace gpud::components
