// End-to-end: `gpud run --metrics-listen-address` serves /metrics over plain HTTP beside the HTTPS
// API, and only that.
#include <gtest/gtest.h>
#include <httplib.h>

#include <filesystem>
#include <fstream>
#include <regex>
#include <thread>

#include "tests/e2e/daemon_process.h"

namespace gpud::e2e {
namespace {

TEST(MetricsListenerE2E, PlainHttpMetricsBesideTheHttpsApi) {
  const std::string dir = make_temp_dir();
  ASSERT_FALSE(dir.empty());
  TempDirGuard remove_dir{dir};
  const std::string kmsg = dir + "/kmsg";
  { std::ofstream(kmsg).flush(); }
  // Port 0: the daemon picks a free port and logs it (a port picked here could be handed to the
  // daemon's API listener too).
  DaemonProcess d(dir + "/data", {"--metrics-listen-address", "127.0.0.1:0"}, true,
                  {"GPUD_KMSG_PATH=" + kmsg});
  ASSERT_TRUE(d.ready()) << d.log();
  int metrics_port = 0;
  for (int i = 0; i < 100 && metrics_port == 0; ++i) {
    std::smatch m;
    const std::string log = d.log();
    if (std::regex_search(log, m,
                          std::regex(R"(serving /metrics over plain http on \S+ \(port (\d+)\))")))
      metrics_port = std::stoi(m[1]);
    else
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  ASSERT_GT(metrics_port, 0) << d.log();
  ASSERT_NE(metrics_port, d.port());
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
  EXPECT_EQ(mutate->status, 405);
  // The API is still HTTPS on its own port.
  auto api = d.get("/healthz");
  ASSERT_TRUE(api);
  EXPECT_EQ(api->status, 200);
  EXPECT_EQ(d.stop(), 0) << d.log();
  EXPECT_FALSE(httplib::Client("127.0.0.1", metrics_port).Get("/metrics"));
}

}  // namespace
}  // namespace gpud::e2e
