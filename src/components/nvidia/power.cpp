#include "components/nvidia/power.h"

#include <fmt/format.h>

namespace gpud::components {

namespace {

// usage / (enforced limit, or the management limit when that is 0 or unknown) in percent.
std::optional<double> used_percent(const nvml::GpuSnapshot& g) {
  if (!g.power_usage_mw.ok()) return std::nullopt;
  uint32_t limit = g.power_enforced_limit_mw.ok() ? g.power_enforced_limit_mw.value : 0;
  if (limit == 0 && g.power_management_limit_mw.ok()) limit = g.power_management_limit_mw.value;
  if (limit == 0) return std::nullopt;
  return 100.0 * g.power_usage_mw.value / limit;
}

std::string watts(const nvml::Field<uint32_t>& f) {
  if (f.ok()) return fmt::format("{:.1f}", f.value / 1000.0);
  return f.supported() ? "error" : "n/a";
}

constexpr GpuMetric kMetrics[] = {
    {"accelerator_nvidia_power_current_usage_milli_watts", "Current GPU power usage in milliwatts",
     MetricKind::kGauge, read_metric<&nvml::GpuSnapshot::power_usage_mw>},
    {"accelerator_nvidia_power_enforced_limit_milli_watts",
     "Enforced GPU power limit in milliwatts", MetricKind::kGauge,
     read_metric<&nvml::GpuSnapshot::power_enforced_limit_mw>},
    {"accelerator_nvidia_power_used_percent", "GPU power usage in percent of the enforced limit",
     MetricKind::kGauge, used_percent},
    {"accelerator_nvidia_power_total_energy_milli_joules",
     "Energy the GPU consumed since the driver was last loaded, in millijoules",
     MetricKind::kCounter, read_metric<&nvml::GpuSnapshot::total_energy_mj>},
};

}  // namespace

NvidiaVerdict evaluate_power(const nvml::NvmlSnapshot& snapshot) {
  NvidiaVerdict v;
  v.healthy_reason =
      "all " + std::to_string(snapshot.gpus.size()) + " GPU(s) were checked, no power issue found";
  v.columns = {"USAGE (W)", "ENFORCED LIMIT (W)", "MGMT LIMIT (W)", "USED %"};
  for (const auto& g : snapshot.gpus) {
    v.usable(g, g.power_usage_mw, "power usage");
    v.usable(g, g.power_enforced_limit_mw, "enforced power limit");
    v.usable(g, g.power_management_limit_mw, "power management limit");
    v.usable(g, g.total_energy_mj, "total energy consumption");
    auto pct = used_percent(g);
    GpuRow& row = v.gpus.emplace_back(g);
    row.data["usage_milli_watts"] = field_json(g.power_usage_mw);
    row.data["enforced_limit_milli_watts"] = field_json(g.power_enforced_limit_mw);
    row.data["management_limit_milli_watts"] = field_json(g.power_management_limit_mw);
    row.data["total_energy_milli_joules"] = field_json(g.total_energy_mj);
    row.data["used_percent"] =
        pct ? nlohmann::json(fmt::format("{:.2f}", *pct)) : nlohmann::json(nullptr);
    row.data["get_power_usage_supported"] = g.power_usage_mw.supported();
    row.data["get_power_limit_supported"] = g.power_enforced_limit_mw.supported();
    row.cells = {watts(g.power_usage_mw), watts(g.power_enforced_limit_mw),
                 watts(g.power_management_limit_mw), pct ? fmt::format("{:.2f}", *pct) : "n/a"};
  }
  return v;
}

PowerComponent::PowerComponent(const ComponentContext& ctx) : NvidiaComponent(ctx, kMetrics) {}

CheckResult PowerComponent::evaluate(const nvml::NvmlSnapshot& snapshot) {
  return render_verdict(name(), evaluate_power(snapshot));
}

}  // namespace gpud::components
