// End-to-end: `gpud scan` on the fake libnvidia-ml's scenarios, each to its verdict: the healthy
// fleets (and a consumer GPU without ECC, where ECC is not applicable) exit 0, each fault makes the
// component that owns it Unhealthy (or Degraded) and the scan exit 1. It is the same set that the
// arm64 build runs under emulation (label "emulated", docs/ARM64.md).
#include <gtest/gtest.h>
#include <stdlib.h>

#include <map>
#include <string>
#include <vector>

#include "tests/e2e/daemon_process.h"

namespace gpud::e2e {
namespace {

struct ScenarioVerdict {
  std::string scenario;  // testing/fixtures/nvml/<scenario>.json
  int exit_code;
  std::map<std::string, std::string> not_healthy;  // component -> health; every other is Healthy
};

const char* kNvidiaComponents =
    "accelerator-nvidia-info,accelerator-nvidia-ecc,accelerator-nvidia-remapped-rows,"
    "accelerator-nvidia-temperature,accelerator-nvidia-power,accelerator-nvidia-clock-speed";

TEST(FakeNvmlScanE2E, EachScenarioGetsItsVerdict) {
  const std::vector<ScenarioVerdict> cases = {
      {"h100x8-healthy", 0, {}},
      {"a100x8-healthy", 0, {}},
      {"rtx4090x1-no-ecc", 0, {}},
      {"h100x8-gpu-lost", 1, {{"accelerator-nvidia-info", "Unhealthy"}}},
      {"h100x8-ecc-volatile-uncorrectable", 1, {{"accelerator-nvidia-ecc", "Unhealthy"}}},
      {"h100x8-row-remap-pending",
       1,
       {{"accelerator-nvidia-ecc", "Unhealthy"},
        {"accelerator-nvidia-remapped-rows", "Unhealthy"}}},
      {"h100x8-hbm-overheat", 1, {{"accelerator-nvidia-temperature", "Degraded"}}},
  };
  for (const ScenarioVerdict& c : cases) {
    SCOPED_TRACE(c.scenario);
    const std::string scenario =
        std::string(GPUD_SOURCE_DIR) + "/testing/fixtures/nvml/" + c.scenario + ".json";
    ::setenv("FAKE_NVML_SCENARIO", scenario.c_str(), 1);
    auto r = run_gpud({"scan", "--nvml-lib", GPUD_FAKE_NVML, "--json", "--log-level", "error",
                       "--components", kNvidiaComponents},
                      120);
    ::unsetenv("FAKE_NVML_SCENARIO");
    EXPECT_EQ(r.exit_code, c.exit_code) << r.out;
    auto doc = parse_json(r.out);
    ASSERT_TRUE(doc.is_object() && doc["components"].is_array()) << r.out;
    // accelerator-nvidia-info reports on every scenario: the fake was loaded and answered.
    bool info_seen = false;
    for (const auto& comp : doc["components"]) {
      const std::string name = comp.value("component", "");
      info_seen |= name == "accelerator-nvidia-info";
      ASSERT_FALSE(comp["states"].empty()) << name;
      const std::string health = comp["states"][0].value("health", "");
      auto want = c.not_healthy.find(name);
      EXPECT_EQ(health, want == c.not_healthy.end() ? "Healthy" : want->second)
          << name << ": " << comp["states"][0].value("reason", "");
    }
    EXPECT_TRUE(info_seen) << r.out;
    for (const auto& [name, health] : c.not_healthy) {
      bool listed = false;
      for (const auto& comp : doc["components"]) listed |= comp.value("component", "") == name;
      EXPECT_TRUE(listed) << name << " missing from the scan";
    }
  }
}

}  // namespace
}  // namespace gpud::e2e
