// The NVIDIA (B) components over every shipped fake-NVML scenario, loaded through the real loader.
#include <gtest/gtest.h>
#include <stdlib.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <memory>

#include "components/nvidia/bad_envs.h"
#include "components/nvidia/fabric_manager.h"
#include "components/nvidia/gpm.h"
#include "components/nvidia/gsp_firmware_mode.h"
#include "components/nvidia/nvlink.h"
#include "components/nvidia/pcie.h"
#include "components/nvidia/persistence_mode.h"
#include "components/nvidia/processes.h"
#include "core/time_util.h"
#include "testing/memory_event_log.h"

namespace gpud::components {
namespace {

using namespace std::chrono_literals;

using MemEventLog = testing_support::MemoryEventLog;

struct Verdict {
  Health health;
  std::string reason;
  std::vector<RepairAction> actions;
};

// Runs every (B) component once on `scenario` and returns name -> verdict.
class ScenarioHarness {
 public:
  explicit ScenarioHarness(const std::string& scenario, std::chrono::milliseconds deadline = 5s,
                           int expected_links = 0) {
    // An empty host root: no /proc/<pid>, no NVSwitch sysfs, no /etc files.
    root_ = std::filesystem::temp_directory_path() /
            ("gpud-scen-b-" + std::to_string(getpid()) + "-" + std::to_string(counter_++));
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
  ~ScenarioHarness() { std::filesystem::remove_all(root_); }

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

void expect_all_healthy(const ScenarioHarness& h, const std::string& scenario) {
  for (const auto& [name, v] : h.verdicts)
    EXPECT_EQ(v.health, Health::kHealthy) << scenario << " " << name << ": " << v.reason;
}

bool contains(const std::string& s, const std::string& sub) {
  return s.find(sub) != std::string::npos;
}

TEST(ScenariosB, HealthyScenariosAreHealthy) {
  for (const char* s :
       {"h100x8-healthy.json", "a100x8-healthy.json", "h100x8-row-remap-pending.json",
        "h100x8-row-remap-failed.json", "h100x8-hw-slowdown.json", "h100x8-hbm-overheat.json"}) {
    ScenarioHarness h(s);
    expect_all_healthy(h, s);
  }
}

TEST(ScenariosB, H100HealthyReasonsAndMetrics) {
  ScenarioHarness h("h100x8-healthy.json");
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

TEST(ScenariosB, A100HasNoFabricState) {
  ScenarioHarness h("a100x8-healthy.json");
  EXPECT_TRUE(
      contains(h.verdicts["accelerator-nvidia-fabric-manager"].reason, "NVSwitch not detected"));
  EXPECT_FALSE(contains(h.verdicts["accelerator-nvidia-fabric-manager"].reason, "fabric state"));
}

TEST(ScenariosB, NvlinkDownIsDegradedOrUnhealthyWithExpectation) {
  {
    ScenarioHarness h("h100x8-nvlink-down.json");
    auto v = h.verdicts["accelerator-nvidia-nvlink"];
    EXPECT_EQ(v.health, Health::kDegraded);
    EXPECT_TRUE(contains(v.reason, "GPU 0 (0000:18:00.0): link(s) 3, 7 inactive")) << v.reason;
    for (const auto& [name, o] : h.verdicts) {
      if (name != "accelerator-nvidia-nvlink") {
        EXPECT_EQ(o.health, Health::kHealthy) << name;
      }
    }
    std::string text = h.metrics_.prometheus_text();
    EXPECT_TRUE(contains(text, "accelerator_nvidia_nvlink_replay_errors{gpu=\"0\"")) << text;
  }
  ScenarioHarness h("h100x8-nvlink-down.json", 5s, 8);
  auto v = h.verdicts["accelerator-nvidia-nvlink"];
  EXPECT_EQ(v.health, Health::kUnhealthy);
  EXPECT_TRUE(contains(v.reason, "require >=8 GPUs with all links active; got 7")) << v.reason;
}

TEST(ScenariosB, PersistenceOffIsUnhealthyWithEvents) {
  ScenarioHarness h("h100x8-persistence-off.json");
  auto v = h.verdicts["accelerator-nvidia-persistence-mode"];
  EXPECT_EQ(v.health, Health::kUnhealthy);
  EXPECT_EQ(v.reason, "all 8 GPU(s) disabled persistence mode");
  EXPECT_TRUE(v.actions.empty());
  EXPECT_EQ(std::count_if(h.events_.events.begin(), h.events_.events.end(),
                          [](const Event& e) { return e.name == "persistence_mode_disabled"; }),
            8);
}

TEST(ScenariosB, FabricDegradedIsUnhealthy) {
  ScenarioHarness h("h100x8-fabric-degraded.json");
  auto v = h.verdicts["accelerator-nvidia-fabric-manager"];
  EXPECT_EQ(v.health, Health::kUnhealthy);
  EXPECT_TRUE(contains(v.reason, "with unhealthy fabric state")) << v.reason;
  EXPECT_TRUE(contains(v.reason, "state=In Progress")) << v.reason;
  EXPECT_TRUE(contains(v.reason, "summary=Limited Capacity")) << v.reason;
  EXPECT_TRUE(contains(v.reason, "degraded bandwidth")) << v.reason;
}

TEST(ScenariosB, GpuLostIsUnhealthyWithReboot) {
  ScenarioHarness h("h100x8-gpu-lost.json");
  for (const auto& [name, v] : h.verdicts) {
    if (name == "accelerator-nvidia-bad-envs") {
      EXPECT_EQ(v.health, Health::kHealthy);
      continue;
    }
    EXPECT_EQ(v.health, Health::kUnhealthy) << name;
    EXPECT_TRUE(contains(v.reason, "GPU 3")) << name << ": " << v.reason;
    EXPECT_EQ(v.actions, std::vector<RepairAction>{RepairAction::kRebootSystem}) << name;
  }
}

TEST(ScenariosB, HungDriverTimesOut) {
  auto start = std::chrono::steady_clock::now();
  ScenarioHarness h("h100x8-hung-driver.json", 300ms);
  EXPECT_LT(std::chrono::steady_clock::now() - start, 5s);
  for (const auto& [name, v] : h.verdicts) {
    if (name == "accelerator-nvidia-bad-envs") continue;
    EXPECT_EQ(v.health, Health::kUnhealthy) << name;
    EXPECT_TRUE(contains(v.reason, "NVML call timed out")) << name << ": " << v.reason;
  }
}

TEST(ScenariosB, ConsumerGpuMostlyNotApplicable) {
  ScenarioHarness h("rtx4090x1-no-ecc.json");
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

}  // namespace
}  // namespace gpud::components
