#include "server/metrics_listener.h"

#include <gtest/gtest.h>
#include <httplib.h>

namespace gpud::server {
namespace {

TEST(MetricsListener, ServesMetricsOverPlainHttpAndNothingElse) {
  MetricRegistry metrics;
  metrics.describe("gpud_test_gauge", "A gauge for this test");
  metrics.set("cpu", "gpud_test_gauge", 7);
  MetricsListener listener(metrics);
  ASSERT_TRUE(listener.start("127.0.0.1:0").ok());
  ASSERT_GT(listener.port(), 0);
  httplib::Client cli("127.0.0.1", listener.port());
  auto m = cli.Get("/metrics");
  ASSERT_TRUE(m);
  EXPECT_EQ(m->status, 200);
  EXPECT_EQ(m->get_header_value("Content-Type"), "text/plain; version=0.0.4; charset=utf-8");
  EXPECT_NE(m->body.find("gpud_test_gauge{gpud_component=\"cpu\"} 7"), std::string::npos)
      << m->body;
  for (const char* path : {"/healthz", "/v1/states", "/", "/metrics/x"}) {
    auto r = cli.Get(path);
    ASSERT_TRUE(r) << path;
    EXPECT_EQ(r->status, 404) << path;
  }
  // No mutation of any kind on this listener, with or without a body.
  auto post = cli.Post("/v1/health-states/set-healthy", "", "application/json");
  ASSERT_TRUE(post);
  EXPECT_EQ(post->status, 404);
  auto put = cli.Put("/metrics", "x", "text/plain");
  ASSERT_TRUE(put);
  EXPECT_NE(put->status, 200);
  listener.stop();
  listener.stop();  // twice is fine
  EXPECT_FALSE(httplib::Client("127.0.0.1", listener.port()).Get("/metrics"));
}

TEST(MetricsListener, BadOrTakenAddressIsAnError) {
  MetricRegistry metrics;
  MetricsListener a(metrics);
  auto bad = a.start("nonsense");
  ASSERT_FALSE(bad);
  EXPECT_NE(bad.error().message.find("--metrics-listen-address"), std::string::npos);
  MetricsListener first(metrics);
  ASSERT_TRUE(first.start("127.0.0.1:0").ok());
  MetricsListener second(metrics);
  auto taken = second.start("127.0.0.1:" + std::to_string(first.port()));
  ASSERT_FALSE(taken);
  EXPECT_NE(taken.error().message.find("cannot listen"), std::string::npos)
      << taken.error().message;
}

}  // namespace
}  // namespace gpud::server
