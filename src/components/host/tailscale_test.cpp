#include "components/host/tailscale.h"

#include <gtest/gtest.h>

#include "testing/fake_command.h"

namespace gpud::components {
namespace {

std::string fixture(const std::string& rel) {
  return std::string(GPUD_SOURCE_DIR) + "/testing/fixtures/" + rel;
}

host::CommandOutput output(int exit_code, std::string out, std::string err = "") {
  host::CommandOutput o;
  o.exit_code = exit_code;
  o.out = std::move(out);
  o.err = std::move(err);
  return o;
}

struct Harness {
  // tailscaled installed in a private bin dir; `tailscale status --json` prints `status` (a file
  // under fixtures/tailscale/), systemd's tailscaled.service `show` (under fixtures/systemd/; ""
  // for a host without systemd).
  Harness(const std::string& status, const std::string& show) {
    bin.script("tailscaled", "exit 0");
    bin.printing("tailscale", fixture("tailscale/" + status));
    config.executable_search_path = bin.dir();
    if (!show.empty()) {
      config.host_root = fixture("host/systemd-host");
      bin.printing("systemctl", fixture("systemd/" + show));
    } else {
      config.host_root = fixture("host/debian12");
    }
    ctx = {&config, nullptr, nullptr, false};
  }
  testing_support::FakeCommands bin;
  Config config;
  ComponentContext ctx;
};

TEST(TailscaleRule, RunningBackendIsHealthy) {
  TailscaleSnapshot s;
  s.status = output(0, R"({"BackendState":"Running","Version":"1.76.6"})");
  CheckResult r = evaluate_tailscale(s);
  EXPECT_EQ(r.health(), Health::kHealthy);
  EXPECT_EQ(r.states[0].reason, "tailscale is running");
}

TEST(TailscaleRule, OtherBackendStateIsUnhealthy) {
  TailscaleSnapshot s;
  s.status = output(0, R"({"BackendState":"Stopped"})");
  CheckResult r = evaluate_tailscale(s);
  EXPECT_EQ(r.health(), Health::kUnhealthy);
  EXPECT_EQ(r.states[0].reason, "tailscale backend state is Stopped");
}

TEST(TailscaleRule, FailingOrGarbledStatusIsUnhealthyWithTheError) {
  TailscaleSnapshot s;
  s.status =
      output(1, "", "failed to connect to local tailscaled; it doesn't appear to be running");
  CheckResult r = evaluate_tailscale(s);
  EXPECT_EQ(r.health(), Health::kUnhealthy);
  EXPECT_EQ(r.states[0].reason, "tailscale status exited with status 1");
  EXPECT_EQ(r.states[0].error,
            "failed to connect to local tailscaled; it doesn't appear to be running");
  s.status = output(0, "{\"BackendState\": 7");
  EXPECT_EQ(evaluate_tailscale(s).states[0].reason, "tailscale status printed no BackendState");
  s.status = Result<host::CommandOutput>(make_error("`tailscale status --json` timed out"));
  EXPECT_EQ(evaluate_tailscale(s).states[0].error, "`tailscale status --json` timed out");
}

TEST(TailscaleRule, InactiveServiceIsUnhealthy) {
  TailscaleSnapshot s;
  host::UnitState u;
  u.id = "tailscaled.service";
  u.load_state = "loaded";
  u.active_state = "inactive";
  u.sub_state = "dead";
  s.service = Result<host::UnitState>(u);
  s.status = output(0, R"({"BackendState":"Running"})");
  CheckResult r = evaluate_tailscale(s);
  EXPECT_EQ(r.health(), Health::kUnhealthy);
  EXPECT_EQ(r.states[0].reason, "tailscaled service is inactive (dead)");
}

TEST(TailscaleComponent, NotApplicableWithoutTailscaled) {
  Config config;
  config.executable_search_path = "/nonexistent";
  ComponentContext ctx{&config, nullptr, nullptr, false};
  EXPECT_FALSE(TailscaleComponent(ctx).supported());
}

TEST(TailscaleComponent, RunningWithActiveServiceIsHealthy) {
  Harness h("status-running.json", "show-tailscaled-active.txt");
  TailscaleComponent c(h.ctx);
  ASSERT_TRUE(c.supported());
  CheckResult r = c.check();
  EXPECT_EQ(r.health(), Health::kHealthy) << r.summary();
  auto data = r.states[0].data;
  EXPECT_EQ(data["backend_state"], "Running");
  EXPECT_EQ(data["service_active_state"], "active");
  EXPECT_EQ(data["version"], "1.76.6-t0b2d5e42a-g2e0b2a1d0");
}

TEST(TailscaleComponent, NeedsLoginAndInactiveServiceAreBothNamed) {
  Harness h("status-needs-login.json", "show-tailscaled-inactive.txt");
  CheckResult r = TailscaleComponent(h.ctx).check();
  EXPECT_EQ(r.health(), Health::kUnhealthy);
  EXPECT_EQ(r.states[0].reason,
            "tailscaled service is inactive (dead); tailscale backend state is NeedsLogin");
}

TEST(TailscaleComponent, WithoutSystemdOnlyTheStatusCounts) {
  Harness h("status-running.json", "");
  CheckResult r = TailscaleComponent(h.ctx).check();
  EXPECT_EQ(r.health(), Health::kHealthy) << r.summary();
  auto data = r.states[0].data;
  EXPECT_FALSE(data.contains("service_active_state"));
}

}  // namespace
}  // namespace gpud::components
