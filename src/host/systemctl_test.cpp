#include "host/systemctl.h"

#include <gtest/gtest.h>

#include "host/host_fs.h"

namespace gpud::host {
namespace {

std::string fixture(const std::string& name) {
  auto r = HostFs(std::string(GPUD_SOURCE_DIR) + "/testing/fixtures").read("/systemd/" + name);
  return r ? *r : std::string();
}

const std::vector<std::string> kDefaults = {
    "gpud.service",       "containerd.service",          "docker.service",
    "kubelet.service",    "nvidia-persistenced.service", "nvidia-fabricmanager.service",
    "nvidia-dcgm.service"};

TEST(UnitName, AddsServiceUnlessTheNameHasAUnitSuffix) {
  EXPECT_EQ(unit_name("docker"), "docker.service");
  EXPECT_EQ(unit_name("docker.socket"), "docker.socket");
  EXPECT_EQ(unit_name("nvidia-dcgm.service"), "nvidia-dcgm.service");
}

TEST(SystemctlShow, ParsesOneBlockPerUnitInOrder) {
  auto units = parse_systemctl_show(fixture("show-defaults-failed.txt"), kDefaults);
  ASSERT_EQ(units.size(), 7u);
  EXPECT_EQ(units[0].id, "gpud.service");
  EXPECT_EQ(units[0].active_state, "active");
  EXPECT_EQ(units[0].sub_state, "running");
  EXPECT_EQ(units[0].state_changed, "Mon 2026-11-30 08:01:12 UTC");
  EXPECT_EQ(units[2].load_state, "not-found");
  EXPECT_EQ(units[3].active_state, "activating");
  EXPECT_EQ(units[3].sub_state, "auto-restart");
  EXPECT_EQ(units[3].n_restarts, std::optional<uint64_t>(7));
  EXPECT_EQ(units[4].active_state, "failed");
  for (const auto& u : units) EXPECT_EQ(u.error, "") << u.id;
}

TEST(SystemctlShow, GarbledAndMissingBlocksAreErrorsOfTheirUnits) {
  auto units = parse_systemctl_show(fixture("show-defaults-garbled.txt"), kDefaults);
  ASSERT_EQ(units.size(), 7u);
  EXPECT_EQ(units[0].error, "");
  EXPECT_EQ(units[1].error, "NRestarts not a number: \"many\"");
  EXPECT_FALSE(units[1].n_restarts.has_value());
  for (size_t i = 3; i < 7; ++i)
    EXPECT_EQ(units[i].error, "systemctl show printed nothing for it") << units[i].id;
}

TEST(SystemctlShow, ABlockForAnotherUnitIsAnError) {
  auto units = parse_systemctl_show("Id=docker.service\nLoadState=loaded\nActiveState=active\n",
                                    {"containerd.service"});
  ASSERT_EQ(units.size(), 1u);
  EXPECT_EQ(units[0].error, "systemctl show answered for docker.service");
}

TEST(SystemctlShow, ACommandThatFailsIsAnErrorWithItsMessage) {
  auto r = systemctl_show("false", "/bin:/usr/bin", {"docker"}, std::chrono::seconds(5));
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().message, "systemctl show exited with status 1");
  auto missing = systemctl_show("gpud-no-such-systemctl", "/bin:/usr/bin", {"docker"},
                                std::chrono::seconds(5));
  ASSERT_FALSE(missing);
  EXPECT_EQ(missing.error().message, "gpud-no-such-systemctl not found");
}

TEST(SystemdRunning, LooksForRunSystemdSystemUnderTheHostRoot) {
  const std::string fixtures = std::string(GPUD_SOURCE_DIR) + "/testing/fixtures/host/";
  EXPECT_TRUE(systemd_running(HostFs(fixtures + "systemd-host")));
  EXPECT_FALSE(systemd_running(HostFs(fixtures + "debian12")));
}

}  // namespace
}  // namespace gpud::host
