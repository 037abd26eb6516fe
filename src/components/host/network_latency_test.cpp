#include "components/host/network_latency.h"

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

namespace gpud::components {
namespace {

using std::chrono::microseconds;
using std::chrono::milliseconds;

host::TcpConnectResult reached(std::string target, microseconds latency) {
  return {std::move(target), latency, ""};
}

host::TcpConnectResult failed(std::string target, std::string error) {
  return {std::move(target), std::nullopt, std::move(error)};
}

TEST(NetworkLatencyRule, UnderTheThresholdIsHealthy) {
  CheckResult r = evaluate_network_latency(
      {reached("10.0.0.1:443", microseconds(1500)), reached("db:5432", microseconds(800))},
      milliseconds(100));
  EXPECT_EQ(r.health(), Health::kHealthy);
  EXPECT_EQ(r.states[0].reason, "TCP connect latency: 10.0.0.1:443 1.5 ms, db:5432 0.8 ms");
}

TEST(NetworkLatencyRule, AboveTheThresholdIsDegradedNamingTheTarget) {
  CheckResult r = evaluate_network_latency(
      {reached("10.0.0.1:443", microseconds(150'000)), reached("db:5432", microseconds(800))},
      milliseconds(100));
  EXPECT_EQ(r.health(), Health::kDegraded);
  EXPECT_EQ(r.states[0].reason, "TCP connect latency above 100 ms: 10.0.0.1:443 150.0 ms");
}

TEST(NetworkLatencyRule, UnreachableTargetIsUnhealthyWithWhy) {
  CheckResult r = evaluate_network_latency(
      {failed("10.0.0.1:443", "Connection refused"), reached("db:5432", microseconds(800))},
      milliseconds(100));
  EXPECT_EQ(r.health(), Health::kUnhealthy);
  EXPECT_EQ(r.states[0].reason, "cannot connect to 10.0.0.1:443 (Connection refused)");
  EXPECT_EQ(r.states[0].error, "10.0.0.1:443: Connection refused");
  auto data = r.states[0].data;
  EXPECT_FALSE(data["targets"][0].contains("latency_milliseconds"));
  EXPECT_EQ(data["targets"][1]["latency_milliseconds"], 0.8);
}

TEST(NetworkLatencyComponent, NotApplicableWithoutTargets) {
  Config config;
  ComponentContext ctx{&config, nullptr, nullptr, false};
  NetworkLatencyComponent c(ctx);
  EXPECT_FALSE(c.supported());
  EXPECT_EQ(c.tags(), (std::vector<std::string>{"network", "network-latency"}));
}

TEST(NetworkLatencyComponent, MeasuresALocalListenerAndDropsTheSeriesOfAClosedOne) {
  int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof a;
  ASSERT_EQ(::bind(fd, reinterpret_cast<sockaddr*>(&a), len), 0);
  ASSERT_EQ(::listen(fd, 4), 0);
  ASSERT_EQ(::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len), 0);
  const std::string target = "127.0.0.1:" + std::to_string(ntohs(a.sin_port));

  Config config;
  config.network_latency_targets = {target};
  config.network_latency_threshold = milliseconds(2000);
  MetricRegistry metrics;
  ComponentContext ctx{&config, nullptr, &metrics, false};
  NetworkLatencyComponent c(ctx);
  ASSERT_TRUE(c.supported());
  CheckResult r = c.check();
  EXPECT_EQ(r.health(), Health::kHealthy) << r.summary();
  EXPECT_NE(metrics.prometheus_text().find(
                "network_latency_tcp_connect_milliseconds{gpud_component=\"network-latency\","
                "target=\"" +
                target + "\"}"),
            std::string::npos)
      << metrics.prometheus_text();

  ::close(fd);
  r = c.check();
  EXPECT_EQ(r.health(), Health::kUnhealthy) << r.summary();
  EXPECT_EQ(r.states[0].reason, "cannot connect to " + target + " (Connection refused)");
  EXPECT_EQ(metrics.prometheus_text().find("target=\"" + target + "\""), std::string::npos)
      << "a latency not measured is absent";
}

}  // namespace
}  // namespace gpud::components
