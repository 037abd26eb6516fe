#include "components/host/power_supply.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <vector>

#include "components/snapshot_metric.h"

namespace gpud::components {

namespace {

bool offline(const host::PowerSupply& s) {
  return s.present.value_or(true) && s.online.has_value() && *s.online == 0;
}

}  // namespace

nlohmann::json to_json(const host::PowerSupplies& s) {
  nlohmann::json list = nlohmann::json::array();
  for (const auto& p : s.supplies) {
    nlohmann::json j = {{"name", p.name}, {"type", p.type}};
    if (p.present) j["present"] = *p.present;
    if (p.online) j["online"] = *p.online;
    if (!p.status.empty()) j["status"] = p.status;
    if (p.capacity_percent) j["capacity_percent"] = *p.capacity_percent;
    if (!p.error.empty()) j["error"] = p.error;
    list.push_back(std::move(j));
  }
  return {{"power_supplies", std::move(list)}};
}

CheckResult evaluate_power_supply(const Result<host::PowerSupplies>& snapshot) {
  if (!snapshot) {
    CheckResult r =
        single_state("power-supply", Health::kUnhealthy, "failed to read power supplies");
    r.states[0].error = snapshot.error().message;
    r.detail = "error: " + snapshot.error().message + "\n";
    return r;
  }
  std::vector<std::string> unreadable, offline_names, detail;
  for (const auto& p : snapshot->supplies) {
    if (!p.error.empty()) unreadable.push_back(p.name + ": " + p.error);
    if (offline(p)) offline_names.push_back(p.name + (p.type.empty() ? "" : " (" + p.type + ")"));
    std::string line = p.name + ": " + (p.type.empty() ? "unknown type" : p.type);
    if (p.present) line += *p.present ? ", present" : ", not present";
    if (p.online) line += *p.online == 0 ? ", offline" : ", online";
    if (!p.status.empty()) line += ", " + p.status;
    if (p.capacity_percent) line += fmt::format(", {}%", *p.capacity_percent);
    if (!p.error.empty()) line += " (" + p.error + ")";
    detail.push_back(std::move(line));
  }
  Health health = Health::kHealthy;
  std::vector<std::string> reasons;
  if (!unreadable.empty()) {
    health = Health::kUnhealthy;
    reasons.push_back(fmt::format("power supply unreadable: {}", fmt::join(unreadable, "; ")));
  }
  if (!offline_names.empty()) {
    health = worst(health, Health::kDegraded);
    reasons.push_back(
        fmt::format("power supply present but offline: {}", fmt::join(offline_names, ", ")));
  }
  std::string reason;
  if (!reasons.empty())
    reason = fmt::format("{}", fmt::join(reasons, "; "));
  else if (snapshot->supplies.empty())
    reason = "no power supplies";
  else
    reason = fmt::format("{} power supply(ies), none offline", snapshot->supplies.size());
  CheckResult r =
      single_state("power-supply", health, std::move(reason), std::nullopt, to_json(*snapshot));
  if (!unreadable.empty()) r.states[0].error = fmt::format("{}", fmt::join(unreadable, "; "));
  r.detail = detail.empty() ? "no power supplies\n" : fmt::format("{}\n", fmt::join(detail, "\n"));
  return r;
}

namespace {

Labels supply_labels(const host::PowerSupply& p) { return {{"supply", p.name}, {"type", p.type}}; }

constexpr SnapshotMetric<host::PowerSupplies> kMetrics[] = {
    {.name = "power_supply_online",
     .help = "Whether the power supply is online (0 offline, 1 online, 2 online with "
             "programmable output), where the driver reports it",
     .series =
         [](const host::PowerSupplies& s, MetricSeries& out) {
           for (const auto& p : s.supplies)
             if (p.online) out.emplace_back(supply_labels(p), *p.online);
         }},
    {.name = "power_supply_capacity_percent",
     .help = "The power supply's (battery's) capacity in percent, where reported",
     .series =
         [](const host::PowerSupplies& s, MetricSeries& out) {
           for (const auto& p : s.supplies)
             if (p.capacity_percent) out.emplace_back(supply_labels(p), *p.capacity_percent);
         }},
};
static_assert(valid_metric_table(kMetrics));

}  // namespace

PowerSupplyComponent::PowerSupplyComponent(const ComponentContext& ctx)
    : Component(ctx), fs_(ctx.config->host_root) {
  describe_metrics(ctx.metrics, kMetrics);
}

CheckResult PowerSupplyComponent::check() {
  auto snapshot = host::read_power_supplies(fs_);
  publish_metrics(ctx().metrics, name(), kMetrics, snapshot);
  return evaluate_power_supply(snapshot);
}

}  // namespace gpud::components
