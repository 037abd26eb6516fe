#include "components/host/fuse.h"

#include <gtest/gtest.h>

#include "testing/memory_event_log.h"

namespace gpud::components {
namespace {

std::string fixture_root(const std::string& name) {
  return std::string(GPUD_SOURCE_DIR) + "/testing/fixtures/host/" + name;
}

struct Harness {
  explicit Harness(const std::string& fixture) {
    config.host_root = fixture_root(fixture);
    ctx = {&config, &events, &metrics, false};
  }
  Config config;
  testing_support::MemoryEventLog events;
  MetricRegistry metrics;
  ComponentContext ctx;
};

host::FuseConnection connection(uint64_t waiting, uint64_t threshold, uint64_t max_background) {
  host::FuseConnection c;
  c.id = "52";
  c.source = "sshfs";
  c.mount_point = "/mnt/data";
  c.waiting = waiting;
  c.congestion_threshold = threshold;
  c.max_background = max_background;
  return c;
}

TEST(FuseRule, PercentagesAgainstEachLimit) {
  auto c = connection(9, 10, 12);
  EXPECT_DOUBLE_EQ(*fuse_congested_percent(c), 90.0);
  EXPECT_DOUBLE_EQ(*fuse_max_background_percent(c), 75.0);
  c.congestion_threshold = 0;
  EXPECT_FALSE(fuse_congested_percent(c).has_value()) << "no division by zero";
  c.waiting.reset();
  EXPECT_FALSE(fuse_max_background_percent(c).has_value());
}

TEST(FuseRule, CongestedAtNinetyPercentOfThresholdOrEightyOfMaxBackground) {
  EXPECT_FALSE(fuse_congested(connection(8, 10, 100)));
  EXPECT_TRUE(fuse_congested(connection(9, 10, 100)));
  EXPECT_FALSE(fuse_congested(connection(7, 100, 10)));
  EXPECT_TRUE(fuse_congested(connection(8, 100, 10)));
}

TEST(FuseRule, CongestedConnectionIsDegradedNamingIt) {
  host::FuseConnections s;
  s.control_fs_present = true;
  s.connections = {connection(11, 9, 12)};
  CheckResult r = evaluate_fuse(s);
  EXPECT_EQ(r.health(), Health::kDegraded);
  EXPECT_EQ(r.states[0].reason,
            "FUSE connection congested: sshfs on /mnt/data (connection 52) (122.2% of congestion "
            "threshold, 91.7% of max background)");
}

TEST(FuseRule, NoFuseIsHealthy) {
  EXPECT_EQ(evaluate_fuse(host::FuseConnections{}).states[0].reason,
            "no FUSE connections (fuse not loaded)");
  host::FuseConnections none;
  none.control_fs_present = true;
  CheckResult r = evaluate_fuse(none);
  EXPECT_EQ(r.health(), Health::kHealthy);
  EXPECT_EQ(r.states[0].reason, "no FUSE connections");
}

TEST(FuseRule, UnreadableDirectoryIsUnhealthyWithError) {
  CheckResult r = evaluate_fuse(Result<host::FuseConnections>(make_error("opendir: denied")));
  EXPECT_EQ(r.health(), Health::kUnhealthy);
  EXPECT_EQ(r.states[0].error, "opendir: denied");
}

TEST(FuseComponent, HealthyFixtureNamesConnectionsFromTheMountTable) {
  Harness h("fuse-healthy");
  FuseComponent c(h.ctx);
  CheckResult r = c.check();
  EXPECT_EQ(r.health(), Health::kHealthy) << r.summary();
  EXPECT_EQ(r.states[0].reason, "2 FUSE connection(s), none congested");
  auto data = r.states[0].data;
  ASSERT_EQ(data["connections"].size(), 2u);
  EXPECT_EQ(data["connections"][0]["connection"], "45");
  EXPECT_EQ(data["connections"][0]["device_name"], "lxcfs");
  EXPECT_EQ(data["connections"][1]["mount_point"], "/mnt/datasets");
  EXPECT_EQ(data["connections"][1]["fs_type"], "fuse.sshfs");
  EXPECT_EQ(data["connections"][1]["waiting"], 3);
  std::string text = h.metrics.prometheus_text();
  EXPECT_NE(text.find("fuse_connections_congested_percent_against_threshold{connection=\"52\","
                      "device_name=\"ubuntu@10.0.0.7:/datasets\",gpud_component=\"fuse\"} 33.3"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("fuse_connections_max_background_percent_against_threshold{connection=\"45\""
                      ",device_name=\"lxcfs\",gpud_component=\"fuse\"} 0"),
            std::string::npos)
      << text;
  EXPECT_TRUE(h.events.events.empty());
}

TEST(FuseComponent, CongestedFixtureIsDegradedAndRecordsOneCriticalEvent) {
  Harness h("fuse-congested");
  FuseComponent c(h.ctx);
  CheckResult r = c.check();
  EXPECT_EQ(r.health(), Health::kDegraded) << r.summary();
  EXPECT_NE(r.states[0].reason.find("ubuntu@10.0.0.7:/datasets on /mnt/datasets"),
            std::string::npos)
      << r.states[0].reason;
  ASSERT_EQ(h.events.events.size(), 1u);
  const Event& e = h.events.events[0];
  EXPECT_EQ(e.component, "fuse");
  EXPECT_EQ(e.name, "fuse_connections");
  EXPECT_EQ(e.type, EventType::kCritical);
  EXPECT_EQ(e.extra_info["device_name"], "ubuntu@10.0.0.7:/datasets");
  EXPECT_NE(e.message.find("122.2% of congestion threshold, 91.7% of max background (11 requests "
                           "waiting)"),
            std::string::npos)
      << e.message;
  // Still congested at the next check: no second event until it recovers and congests again.
  c.check();
  EXPECT_EQ(h.events.events.size(), 1u);
}

TEST(FuseComponent, GarbledFixtureIsUnhealthyNamingTheFilesAndDropsItsSeries) {
  Harness h("fuse-garbled");
  FuseComponent c(h.ctx);
  CheckResult r = c.check();
  EXPECT_EQ(r.health(), Health::kUnhealthy) << r.summary();
  EXPECT_EQ(r.states[0].error,
            "ubuntu@10.0.0.7:/datasets on /mnt/datasets (connection 52): waiting not a number: "
            "\"lots\", max_background unreadable");
  std::string text = h.metrics.prometheus_text();
  EXPECT_EQ(text.find("connection=\"52\""), std::string::npos) << "a value not read is absent";
  EXPECT_NE(text.find("connection=\"45\""), std::string::npos) << text;
}

TEST(FuseComponent, HostWithoutFuseIsHealthy) {
  Harness h("debian12");
  EXPECT_EQ(FuseComponent(h.ctx).check().states[0].reason, "no FUSE connections (fuse not loaded)");
}

}  // namespace
}  // namespace gpud::components
