#include "components/host/systemd.h"

#include <gtest/gtest.h>

#include "core/json.h"
#include "testing/fake_command.h"
#include "testing/fake_systemd_bus.h"

namespace gpud::components {
namespace {

using std::chrono::minutes;

std::string fixture(const std::string& rel) {
  return std::string(GPUD_SOURCE_DIR) + "/testing/fixtures/" + rel;
}

struct Harness {
  // A host with systemd as PID 1 whose systemctl prints `show_output` (a file under fixtures/).
  explicit Harness(const std::string& show_output, std::vector<std::string> units = {}) {
    config.host_root = fixture("host/systemd-host");
    config.systemctl_command = bin.printing("systemctl", fixture("systemd/" + show_output));
    config.systemd_units = std::move(units);
    ctx = {&config, nullptr, &metrics, false};
  }
  testing_support::FakeCommands bin;
  Config config;
  MetricRegistry metrics;
  ComponentContext ctx;
};

SystemdUnitReport unit(std::string id, std::string active, std::string sub,
                       std::optional<uint64_t> restarts = 0) {
  SystemdUnitReport u;
  u.state.id = std::move(id);
  u.state.load_state = "loaded";
  u.state.active_state = std::move(active);
  u.state.sub_state = std::move(sub);
  u.state.n_restarts = restarts;
  return u;
}

TEST(RestartHistory, CountsRestartsWithinTheWindowAndWhenTheCountChanged) {
  const TimePoint t0{std::chrono::hours(1000)};
  RestartHistory h;
  h.observe(t0, 2);
  EXPECT_EQ(h.restarts_within(t0, minutes(10)), 0u);
  EXPECT_FALSE(h.changed_at().has_value());
  h.observe(t0 + minutes(1), 2);
  h.observe(t0 + minutes(2), 4);
  EXPECT_EQ(h.changed_at(), std::optional<TimePoint>(t0 + minutes(2)));
  h.observe(t0 + minutes(3), 5);
  EXPECT_EQ(h.restarts_within(t0 + minutes(3), minutes(10)), 3u);
  // Twelve minutes on, the count ten minutes ago (4, at +2 min) is the base: one restart since.
  h.observe(t0 + minutes(12), 5);
  EXPECT_EQ(h.restarts_within(t0 + minutes(12), minutes(10)), 1u);
  h.observe(t0 + minutes(14), 5);
  EXPECT_EQ(h.restarts_within(t0 + minutes(14), minutes(10)), 0u);
  // A count that went down (restarted by hand) starts afresh.
  h.observe(t0 + minutes(15), 0);
  EXPECT_EQ(h.restarts_within(t0 + minutes(15), minutes(10)), 0u);
  EXPECT_EQ(h.changed_at(), std::optional<TimePoint>(t0 + minutes(15)));
}

TEST(SystemdRule, FailedUnitIsUnhealthy) {
  CheckResult r = evaluate_systemd(std::vector<SystemdUnitReport>{
      unit("gpud.service", "active", "running"), unit("docker.service", "failed", "failed")});
  EXPECT_EQ(r.health(), Health::kUnhealthy);
  EXPECT_EQ(r.states[0].reason, "unit docker.service failed (failed)");
}

TEST(SystemdRule, RestartLoopingUnitIsUnhealthy) {
  SystemdUnitReport looping = unit("kubelet.service", "active", "running", 9);
  looping.recent_restarts = 3;
  EXPECT_TRUE(restart_looping(looping));
  looping.recent_restarts = 2;
  EXPECT_FALSE(restart_looping(looping));
  EXPECT_TRUE(restart_looping(unit("kubelet.service", "activating", "auto-restart", 3)));
  EXPECT_FALSE(restart_looping(unit("kubelet.service", "activating", "auto-restart", 2)));
  looping.recent_restarts = 4;
  CheckResult r = evaluate_systemd(std::vector<SystemdUnitReport>{looping});
  EXPECT_EQ(r.health(), Health::kUnhealthy);
  EXPECT_EQ(r.states[0].reason,
            "unit kubelet.service is restart-looping (9 restarts, 4 within 10m0s; now "
            "active/running)");
}

TEST(SystemdRule, MissingDefaultUnitsAreLeftOutButARequiredOneIsUnhealthy) {
  SystemdUnitReport missing = unit("docker.service", "inactive", "dead");
  missing.state.load_state = "not-found";
  CheckResult r = evaluate_systemd(std::vector<SystemdUnitReport>{missing});
  EXPECT_EQ(r.health(), Health::kHealthy);
  EXPECT_EQ(r.states[0].reason, "none of the watched units is installed");
  missing.required = true;
  r = evaluate_systemd(std::vector<SystemdUnitReport>{missing});
  EXPECT_EQ(r.health(), Health::kUnhealthy);
  EXPECT_EQ(r.states[0].reason, "unit docker.service is not-found");
}

TEST(SystemdRule, SystemctlErrorIsUnhealthyWithIt) {
  CheckResult r = evaluate_systemd(Result<std::vector<SystemdUnitReport>>(make_error("timed out")));
  EXPECT_EQ(r.health(), Health::kUnhealthy);
  EXPECT_EQ(r.states[0].error, "timed out");
}

TEST(SystemdComponent, NotApplicableWithoutSystemdAsPid1) {
  Config config;
  config.host_root = fixture("host/debian12");
  ComponentContext ctx{&config, nullptr, nullptr, false};
  EXPECT_FALSE(SystemdComponent(ctx).supported());
}

TEST(SystemdComponent, HealthyDefaultsListInstalledUnits) {
  Harness h("show-defaults-healthy.txt");
  SystemdComponent c(h.ctx);
  ASSERT_TRUE(c.supported());
  CheckResult r = c.check();
  EXPECT_EQ(r.health(), Health::kHealthy) << r.summary();
  EXPECT_EQ(r.states[0].reason,
            "gpud.service active, containerd.service active, kubelet.service active, "
            "nvidia-persistenced.service active");
  auto data = r.states[0].data;
  ASSERT_EQ(data["units"].size(), 4u);
  EXPECT_EQ(data["units"][2]["unit"], "kubelet.service");
  EXPECT_EQ(data["units"][2]["n_restarts"], 1);
  EXPECT_EQ(data["units"][2]["state_changed"], "Mon 2026-11-30 08:03:40 UTC");
  std::string text = h.metrics.prometheus_text();
  EXPECT_NE(text.find("systemd_unit_active{gpud_component=\"systemd\",unit=\"gpud.service\"} 1"),
            std::string::npos)
      << text;
  EXPECT_NE(
      text.find("systemd_unit_restarts{gpud_component=\"systemd\",unit=\"kubelet.service\"} 1"),
      std::string::npos)
      << text;
  EXPECT_EQ(text.find("docker.service"), std::string::npos) << "not installed: no series";
}

TEST(SystemdComponent, FailedAndRestartLoopingUnitsAreNamed) {
  Harness h("show-defaults-failed.txt");
  CheckResult r = SystemdComponent(h.ctx).check();
  EXPECT_EQ(r.health(), Health::kUnhealthy) << r.summary();
  EXPECT_EQ(r.states[0].reason,
            "unit kubelet.service is restart-looping (7 restarts, 0 within 10m0s; now "
            "activating/auto-restart); unit nvidia-persistenced.service failed (failed)");
}

TEST(SystemdComponent, GarbledOutputIsUnhealthyNamingEachUnit) {
  Harness h("show-defaults-garbled.txt");
  CheckResult r = SystemdComponent(h.ctx).check();
  EXPECT_EQ(r.health(), Health::kUnhealthy) << r.summary();
  EXPECT_NE(r.states[0].reason.find(
                "unit containerd.service unreadable (NRestarts not a number: \"many\")"),
            std::string::npos)
      << r.states[0].reason;
  EXPECT_NE(r.states[0].error.find("nvidia-dcgm.service: systemctl show printed nothing for it"),
            std::string::npos)
      << r.states[0].error;
  EXPECT_EQ(h.metrics.prometheus_text().find("containerd.service"), std::string::npos);
}

TEST(SystemdComponent, ConfiguredUnitsArePassedToSystemctl) {
  Harness h("show-tailscaled-active.txt", {"tailscaled"});
  // The script records its arguments before printing the recorded output.
  const std::string args = h.bin.path("args");
  h.config.systemctl_command =
      h.bin.script("systemctl-recording", "echo \"$@\" > '" + args + "'\ncat '" +
                                              fixture("systemd/show-tailscaled-active.txt") + "'");
  CheckResult r = SystemdComponent(h.ctx).check();
  EXPECT_EQ(r.health(), Health::kHealthy) << r.summary();
  EXPECT_EQ(r.states[0].reason, "tailscaled.service active");
  std::ifstream in(args);
  std::string line;
  std::getline(in, line);
  EXPECT_EQ(line,
            "show --no-pager -p Id,LoadState,ActiveState,SubState,NRestarts,StateChangeTimestamp "
            "tailscaled.service");
}

TEST(SystemdComponent, SystemctlThatCannotRunIsUnhealthy) {
  Harness h("show-defaults-healthy.txt");
  h.config.systemctl_command =
      h.bin.script("systemctl-broken", "echo 'Unknown operation show.' >&2\nexit 1");
  CheckResult r = SystemdComponent(h.ctx).check();
  EXPECT_EQ(r.health(), Health::kUnhealthy);
  EXPECT_EQ(r.states[0].error, "systemctl show exited with status 1: Unknown operation show.");
}

// gpud in a container: the host's root with its systemd, no systemctl in the image.
struct ContainerView {
  ContainerView() {
    config.host_root = root;
    config.systemctl_command = "systemctl-not-in-the-image";
    config.systemd_units = {"containerd", "kubelet"};
    ctx = {&config, nullptr, &metrics, false};
  }
  testing_support::SystemdHostRoot host;
  const std::string& root = host.dir;
  Config config;
  MetricRegistry metrics;
  ComponentContext ctx;
};

TEST(SystemdComponent, InAContainerAsksTheHostsSystemdOverDBus) {
  ContainerView v;
  testing_support::FakeUnit failed;
  failed.active_state = "failed";
  failed.sub_state = "failed";
  {
    testing_support::FakeSystemdBus bus(v.root + "/run/dbus/system_bus_socket",
                                        {{"containerd.service", {}}, {"kubelet.service", {}}},
                                        testing_support::FakeSystemdBus::Mode::kMessageBus);
    ASSERT_TRUE(bus.ok());
    SystemdComponent c(v.ctx);
    ASSERT_TRUE(c.supported());
    CheckResult r = c.check();
    EXPECT_EQ(r.health(), Health::kHealthy) << r.summary();
    EXPECT_EQ(r.states[0].reason, "containerd.service active, kubelet.service active");
    EXPECT_TRUE(check_succeeded(r));
  }
  testing_support::FakeSystemdBus systemd(
      v.root + "/run/systemd/private", {{"containerd.service", {}}, {"kubelet.service", failed}});
  ASSERT_TRUE(systemd.ok());
  CheckResult r = SystemdComponent(v.ctx).check();
  EXPECT_EQ(r.health(), Health::kUnhealthy);
  EXPECT_EQ(r.states[0].reason, "unit kubelet.service failed (failed)");
}

TEST(SystemdComponent, NoWayToAskTheHostsSystemdIsNotCheckedNotUnhealthy) {
  ContainerView v;
  CheckResult r = SystemdComponent(v.ctx).check();
  EXPECT_EQ(r.health(), Health::kHealthy) << r.summary();
  EXPECT_FALSE(check_succeeded(r));
  EXPECT_EQ(r.states[0].reason.rfind("not checked: cannot ask the host's systemd (", 0), 0u)
      << r.states[0].reason;
  EXPECT_NE(r.states[0].error.find(v.root + "/run/dbus/system_bus_socket does not exist"),
            std::string::npos)
      << r.states[0].error;
  EXPECT_NE(r.states[0].error.find("systemctl-not-in-the-image not found"), std::string::npos);
  EXPECT_TRUE(not_checked(r.states[0]));
  EXPECT_EQ(wire_extra_info(r.states[0]).at("not_checked"),
            nlohmann::json::array({"systemd units: " + r.states[0].error}).dump());
  EXPECT_EQ(v.metrics.prometheus_text().find("systemd_unit_active{"), std::string::npos);
}

TEST(SystemdComponent, SystemctlThatCannotReachSystemdIsNotChecked) {
  Harness h("show-defaults-healthy.txt");
  h.config.systemctl_command = h.bin.script(
      "systemctl-in-a-container",
      "echo 'System has not been booted with systemd as init system (PID 1). Can'\\''t "
      "operate.' >&2\nexit 1");
  CheckResult r = SystemdComponent(h.ctx).check();
  EXPECT_EQ(r.health(), Health::kHealthy) << r.summary();
  EXPECT_FALSE(check_succeeded(r));
  EXPECT_NE(r.states[0].error.find("has not been booted with systemd"), std::string::npos)
      << r.states[0].error;
}

}  // namespace
}  // namespace gpud::components
