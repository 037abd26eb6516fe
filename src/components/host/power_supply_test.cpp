#include "components/host/power_supply.h"

#include <gtest/gtest.h>

namespace gpud::components {
namespace {

std::string fixture_root(const std::string& name) {
  return std::string(GPUD_SOURCE_DIR) + "/testing/fixtures/host/" + name;
}

struct Harness {
  explicit Harness(const std::string& fixture) {
    config.host_root = fixture_root(fixture);
    ctx = {&config, nullptr, &metrics, false};
  }
  Config config;
  MetricRegistry metrics;
  ComponentContext ctx;
};

host::PowerSupply supply(std::string name, std::optional<int> online,
                         std::optional<bool> present = std::nullopt) {
  host::PowerSupply s;
  s.name = std::move(name);
  s.type = "Mains";
  s.online = online;
  s.present = present;
  return s;
}

TEST(PowerSupplyRule, PresentButOfflineIsDegraded) {
  host::PowerSupplies s;
  s.class_present = true;
  s.supplies = {supply("PSU1", 1), supply("PSU2", 0)};
  CheckResult r = evaluate_power_supply(s);
  EXPECT_EQ(r.health(), Health::kDegraded);
  EXPECT_EQ(r.states[0].reason, "power supply present but offline: PSU2 (Mains)");
}

TEST(PowerSupplyRule, AbsentSupplyOrOneWithoutOnlineIsNotOffline) {
  host::PowerSupplies s;
  s.supplies = {supply("PSU1", 0, false), supply("BAT0", std::nullopt, true)};
  EXPECT_EQ(evaluate_power_supply(s).health(), Health::kHealthy);
}

TEST(PowerSupplyRule, NoSuppliesIsHealthy) {
  CheckResult r = evaluate_power_supply(host::PowerSupplies{});
  EXPECT_EQ(r.health(), Health::kHealthy);
  EXPECT_EQ(r.states[0].reason, "no power supplies");
}

TEST(PowerSupplyRule, UnreadableClassIsUnhealthyWithError) {
  CheckResult r = evaluate_power_supply(Result<host::PowerSupplies>(make_error("denied")));
  EXPECT_EQ(r.health(), Health::kUnhealthy);
  EXPECT_EQ(r.states[0].error, "denied");
}

TEST(PowerSupplyComponent, HealthyFixtureReadsEveryAttribute) {
  Harness h("power-supply-healthy");
  PowerSupplyComponent c(h.ctx);
  CheckResult r = c.check();
  EXPECT_EQ(r.health(), Health::kHealthy) << r.summary();
  EXPECT_EQ(r.states[0].reason, "3 power supply(ies), none offline");
  auto data = r.states[0].data;
  ASSERT_EQ(data["power_supplies"].size(), 3u);
  EXPECT_EQ(data["power_supplies"][0],
            nlohmann::json({{"name", "AC"}, {"type", "Mains"}, {"online", 1}}));
  EXPECT_EQ(data["power_supplies"][1], nlohmann::json({{"name", "BAT0"},
                                                       {"type", "Battery"},
                                                       {"present", true},
                                                       {"status", "Full"},
                                                       {"capacity_percent", 100}}));
  EXPECT_EQ(data["power_supplies"][2]["online"], 2);
  std::string text = h.metrics.prometheus_text();
  EXPECT_NE(text.find("power_supply_online{gpud_component=\"power-supply\",supply=\"AC\",type="
                      "\"Mains\"} 1"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("power_supply_capacity_percent{gpud_component=\"power-supply\",supply="
                      "\"BAT0\",type=\"Battery\"} 100"),
            std::string::npos)
      << text;
}

TEST(PowerSupplyComponent, OfflineFixtureIsDegradedNamingTheSupply) {
  Harness h("power-supply-offline");
  CheckResult r = PowerSupplyComponent(h.ctx).check();
  EXPECT_EQ(r.health(), Health::kDegraded) << r.summary();
  EXPECT_EQ(r.states[0].reason, "power supply present but offline: AC (Mains)");
}

TEST(PowerSupplyComponent, GarbledFixtureIsUnhealthyAndItsValuesAreAbsent) {
  Harness h("power-supply-garbled");
  CheckResult r = PowerSupplyComponent(h.ctx).check();
  EXPECT_EQ(r.health(), Health::kUnhealthy) << r.summary();
  EXPECT_EQ(r.states[0].error, "AC: online not 0, 1 or 2: \"yes\"; BAT0: type unreadable");
  std::string text = h.metrics.prometheus_text();
  EXPECT_EQ(text.find("supply=\"AC\""), std::string::npos) << text;
}

TEST(PowerSupplyComponent, HostWithoutTheClassIsHealthy) {
  Harness h("debian12");
  EXPECT_EQ(PowerSupplyComponent(h.ctx).check().states[0].reason, "no power supplies");
}

}  // namespace
}  // namespace gpud::components
