#include "server/metrics_listener.h"

#include <gtest/gtest.h>
#include <httplib.h>

#include <chrono>
#include <memory>
#include <vector>

#include "testing/connection_load.h"

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
  EXPECT_EQ(post->status, 405);
  EXPECT_EQ(post->get_header_value("Allow"), "GET, HEAD");
  auto put = cli.Put("/metrics", "x", "text/plain");
  ASSERT_TRUE(put);
  EXPECT_EQ(put->status, 405);
  listener.stop();
  listener.stop();  // twice is fine
  EXPECT_FALSE(httplib::Client("127.0.0.1", listener.port()).Get("/metrics"));
}

// A scraper shares its address with others (the node's, a NAT's): 20 idle connections from it,
// 60 from another address (more than the table holds together), requests with other methods that
// send no body (bodiless POSTs, a promised body that never comes) and a GET whose body never comes
// leave a scrape answered at once: each gets its 405 or 413 at once and holds no worker, and a
// newcomer closes the connection that waited longest.
TEST(MetricsListener, AScrapeIsServedWhileIdleConnectionsFromItsAddressAndBodilessPostsAreOpen) {
  using namespace std::chrono_literals;
  using gpud::testing::TestConnection;
  MetricRegistry metrics;
  metrics.describe("gpud_test_gauge", "A gauge for this test");
  metrics.set("cpu", "gpud_test_gauge", 7);
  MetricsListener listener(metrics);
  ASSERT_TRUE(listener.start("127.0.0.1:0").ok());
  std::vector<std::unique_ptr<TestConnection>> held;
  for (int i = 0; i < 20; ++i)
    held.push_back(std::make_unique<TestConnection>(listener.port(), false, "127.0.0.1"));
  for (int i = 0; i < 60; ++i)
    held.push_back(std::make_unique<TestConnection>(listener.port(), false, "127.0.0.2"));
  for (int i = 0; i < 6; ++i) {
    auto post = std::make_unique<TestConnection>(listener.port(), false, "127.0.0.1");
    auto start = std::chrono::steady_clock::now();
    ASSERT_TRUE(post->send(i % 2 == 0 ? "POST /metrics HTTP/1.1\r\nHost: x\r\n\r\n"
                                      : "POST /metrics HTTP/1.1\r\nContent-Length: 9000\r\n\r\n"));
    const std::string answer = post->read_response(1s);
    EXPECT_EQ(answer.substr(0, answer.find("\r\n")), "HTTP/1.1 405 Method Not Allowed") << i;
    EXPECT_LT(std::chrono::steady_clock::now() - start, 500ms) << i;
    held.push_back(std::move(post));  // left open
  }
  // A GET whose promised body never comes: 413 at once, no worker waits for it.
  auto promised_body = std::make_unique<TestConnection>(listener.port(), false, "127.0.0.1");
  ASSERT_TRUE(promised_body->send("GET /metrics HTTP/1.1\r\nContent-Length: 9000\r\n\r\n"));
  const std::string refused = promised_body->read_response(1s);
  EXPECT_EQ(refused.substr(0, refused.find("\r\n")), "HTTP/1.1 413 Payload Too Large");
  held.push_back(std::move(promised_body));
  httplib::Client scraper("127.0.0.1", listener.port());
  scraper.set_connection_timeout(2s);
  scraper.set_read_timeout(2s);
  for (int i = 0; i < 3; ++i) {
    auto start = std::chrono::steady_clock::now();
    auto m = scraper.Get("/metrics");
    ASSERT_TRUE(m) << "scrape " << i;
    EXPECT_EQ(m->status, 200);
    EXPECT_NE(m->body.find("gpud_test_gauge{gpud_component=\"cpu\"} 7"), std::string::npos);
    EXPECT_LT(std::chrono::steady_clock::now() - start, 500ms) << "scrape " << i;
    scraper.stop();  // a new connection for the next scrape, as Prometheus's would be
  }
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
