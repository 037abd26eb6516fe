#include "components/host/kernel_module.h"

#include <gtest/gtest.h>

namespace gpud::components {
namespace {

std::string fixture(std::string_view sub) {
  return std::string(GPUD_SOURCE_DIR) + "/testing/fixtures/host-os/" + std::string(sub);
}

struct Harness {
  Harness(std::string root, std::vector<std::string> modules) {
    config.host_root = std::move(root);
    config.kernel_modules = std::move(modules);
    ctx = {&config, nullptr, &metrics, false};
  }
  Config config;
  MetricRegistry metrics;
  ComponentContext ctx;
};

TEST(KernelModuleRule, ReportsMissingInRequiredOrder) {
  EXPECT_EQ(missing_kernel_modules({"nvidia", "gdrdrv", "nvidia_peermem"}, {"nvidia", "ext4"}),
            (std::vector<std::string>{"gdrdrv", "nvidia_peermem"}));
}

TEST(KernelModuleRule, DashAndUnderscoreAreTheSameModule) {
  EXPECT_TRUE(missing_kernel_modules({"nvidia-uvm"}, {"nvidia_uvm"}).empty());
}

TEST(KernelModuleComponent, NothingConfiguredIsHealthy) {
  Harness h(fixture("modules"), {});
  KernelModuleComponent c(h.ctx);
  CheckResult r = c.check();
  EXPECT_EQ(r.health(), Health::kHealthy);
  EXPECT_EQ(r.states[0].reason, "no kernel modules to check");
}

TEST(KernelModuleComponent, AllLoadedIsHealthy) {
  Harness h(fixture("modules"), {"nvidia", "nvidia-uvm", "ib_core"});
  EXPECT_EQ(KernelModuleComponent(h.ctx).check().health(), Health::kHealthy);
}

TEST(KernelModuleComponent, MissingModulesAreUnhealthy) {
  Harness h(fixture("modules"), {"nvidia", "nvidia_peermem", "gdrdrv"});
  CheckResult r = KernelModuleComponent(h.ctx).check();
  EXPECT_EQ(r.health(), Health::kUnhealthy);
  EXPECT_EQ(r.states[0].reason, "kernel modules not loaded: nvidia_peermem, gdrdrv");
  auto data = r.states[0].data;
  EXPECT_EQ(data["missing"], nlohmann::json({"nvidia_peermem", "gdrdrv"}));
}

TEST(KernelModuleComponent, UnreadableProcModulesIsUnhealthyWithError) {
  Harness h(fixture("procs"), {"nvidia"});
  CheckResult r = KernelModuleComponent(h.ctx).check();
  EXPECT_EQ(r.health(), Health::kUnhealthy);
  EXPECT_FALSE(r.states[0].error.empty());
}

}  // namespace
}  // namespace gpud::components
