// End-to-end: `gpud run --metrics-listen-address` serves /metrics over plain HTTP beside the HTTPS
// API, and only that.
#include <gtest/gtest.h>
#include <httplib.h>

#include <filesystem>
#include <fstream>

#include "tests/e2e/daemon_process.h"

namespace gpud::e2e {
namespace {

TEST(MetricsListenerE2E, PlainHttpMetricsBesideTheHttpsApi) {
  const std::string dir = make_temp_dir();
  ASSERT_FALSE(dir.empty());
  TempDirGuard remove_dir{dir};
  const std::string kmsg = dir + "/kmsg";
  { std::ofstream(kmsg).flush(); }
  const int metrics_port = free_port();
  DaemonProcess d(dir + "/data",
                  {"--metrics-listen-address", "127.0.0.1:" + std::to_string(metrics_port)}, true,
                  {"GPUD_KMSG_PATH=" + kmsg});
  ASSERT_TRUE(d.ready()) << d.log();
  httplib::Client plain("127.0.0.1", metrics_port);
  auto m = plain.Get("/metrics");
  ASSERT_TRUE(m) << d.log();
  EXPECT_EQ(m->status, 200);
  EXPECT_NE(m->body.find("gpud_component_health{"), std::string::npos);
  auto states = plain.Get("/v1/states");
  ASSERT_TRUE(states);
  EXPECT_EQ(states->status, 404);
  auto mutate = plain.Post("/v1/health-states/set-healthy", "", "application/json");
  ASSERT_TRUE(mutate);
  EXPECT_EQ(mutate->status, 404);
  // The API is still HTTPS on its own port.
  auto api = d.get("/healthz");
  ASSERT_TRUE(api);
  EXPECT_EQ(api->status, 200);
  EXPECT_EQ(d.stop(), 0) << d.log();
  EXPECT_FALSE(httplib::Client("127.0.0.1", metrics_port).Get("/metrics"));
}

}  // namespace
}  // namespace gpud::e2e
