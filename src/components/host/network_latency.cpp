#include "components/host/network_latency.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <nlohmann/json.hpp>

#include "components/snapshot_metric.h"
#include "core/log.h"

namespace gpud::components {

namespace {

double to_ms(std::chrono::microseconds us) { return static_cast<double>(us.count()) / 1000.0; }

}  // namespace

CheckResult evaluate_network_latency(const std::vector<host::TcpConnectResult>& results,
                                     std::chrono::milliseconds threshold) {
  std::vector<std::string> failed, slow, ok, errors;
  nlohmann::json list = nlohmann::json::array();
  for (const auto& r : results) {
    nlohmann::json j = {{"target", r.target}};
    if (r.latency) {
      const double ms = to_ms(*r.latency);
      j["latency_milliseconds"] = ms;
      if (*r.latency > threshold)
        slow.push_back(fmt::format("{} {:.1f} ms", r.target, ms));
      else
        ok.push_back(fmt::format("{} {:.1f} ms", r.target, ms));
    } else {
      j["error"] = r.error;
      failed.push_back(fmt::format("{} ({})", r.target, r.error));
      errors.push_back(r.target + ": " + r.error);
    }
    list.push_back(std::move(j));
  }
  Health health = Health::kHealthy;
  std::vector<std::string> reasons;
  if (!failed.empty()) {
    health = Health::kUnhealthy;
    reasons.push_back(fmt::format("cannot connect to {}", fmt::join(failed, ", ")));
  }
  if (!slow.empty()) {
    health = worst(health, Health::kDegraded);
    reasons.push_back(fmt::format("TCP connect latency above {} ms: {}", threshold.count(),
                                  fmt::join(slow, ", ")));
  }
  std::string reason = reasons.empty() ? fmt::format("TCP connect latency: {}", fmt::join(ok, ", "))
                                       : fmt::format("{}", fmt::join(reasons, "; "));
  nlohmann::json data = {{"threshold_milliseconds", threshold.count()}, {"targets", list}};
  CheckResult out = single_state("network-latency", health, reason, std::nullopt, data);
  if (!errors.empty()) out.states[0].error = fmt::format("{}", fmt::join(errors, "; "));
  std::string detail;
  for (const auto& r : results)
    detail += r.latency ? fmt::format("{}: {:.1f} ms\n", r.target, to_ms(*r.latency))
                        : fmt::format("{}: {}\n", r.target, r.error);
  out.detail = detail + fmt::format("threshold: {} ms\n", threshold.count());
  return out;
}

namespace {

constexpr SnapshotMetric<std::vector<host::TcpConnectResult>> kMetrics[] = {
    // A target that could not be reached has no latency: no series, not its last one.
    {.name = "network_latency_tcp_connect_milliseconds",
     .help = "TCP connect latency to a --network-latency-targets target",
     .series =
         [](const std::vector<host::TcpConnectResult>& results, MetricSeries& out) {
           for (const auto& r : results)
             if (r.latency) out.emplace_back(Labels{{"target", r.target}}, to_ms(*r.latency));
         }},
};
static_assert(valid_metric_table(kMetrics));

}  // namespace

NetworkLatencyComponent::NetworkLatencyComponent(const ComponentContext& ctx) : Component(ctx) {
  for (const auto& t : ctx.config->network_latency_targets) {
    if (auto parsed = host::parse_tcp_target(t); parsed)
      targets_.push_back(*parsed);
    else  // the CLI refuses these; a Config built elsewhere may not have
      logger("network-latency")->warn("ignoring target {}", parsed.error().message);
  }
  describe_metrics(ctx.metrics, kMetrics);
}

CheckResult NetworkLatencyComponent::check() {
  const auto threshold = config().network_latency_threshold;
  auto results = host::measure_tcp_connect(
      targets_,
      threshold + std::chrono::duration_cast<std::chrono::milliseconds>(kNetworkLatencyGrace));
  publish_metrics(ctx().metrics, name(), kMetrics, &results);
  return evaluate_network_latency(results, threshold);
}

}  // namespace gpud::components
