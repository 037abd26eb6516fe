#include "components/nvidia/power.h"

#include <fmt/format.h>

#include "components/nvidia/gpu_issues.h"

namespace gpud::components {

namespace {

constexpr const char* kName = "accelerator-nvidia-power";
constexpr const char* kUsage = "accelerator_nvidia_power_current_usage_milli_watts";
constexpr const char* kEnforced = "accelerator_nvidia_power_enforced_limit_milli_watts";
constexpr const char* kUsedPercent = "accelerator_nvidia_power_used_percent";

// usage / (enforced limit, or the management limit when that is 0 or unknown) in percent.
std::optional<double> used_percent(const nvml::GpuSnapshot& g) {
  if (!g.power_usage_mw.ok()) return std::nullopt;
  uint32_t limit = g.power_enforced_limit_mw.ok() ? g.power_enforced_limit_mw.value : 0;
  if (limit == 0 && g.power_management_limit_mw.ok()) limit = g.power_management_limit_mw.value;
  if (limit == 0) return std::nullopt;
  return 100.0 * g.power_usage_mw.value / limit;
}

}  // namespace

CheckResult evaluate_power(const nvml::NvmlSnapshot& snapshot) {
  GpuIssues issues;
  nlohmann::json gpus = nlohmann::json::array();
  std::vector<std::vector<std::string>> rows = {
      {"GPU", "USAGE (W)", "ENFORCED LIMIT (W)", "MGMT LIMIT (W)", "USED %"}};
  auto watts = [](const nvml::Field<uint32_t>& f) {
    if (f.ok()) return fmt::format("{:.1f}", f.value / 1000.0);
    return std::string(f.supported() ? "error" : "n/a");
  };
  for (const auto& g : snapshot.gpus) {
    issues.usable(g, g.power_usage_mw, "power usage");
    issues.usable(g, g.power_enforced_limit_mw, "enforced power limit");
    issues.usable(g, g.power_management_limit_mw, "power management limit");
    auto pct = used_percent(g);
    nlohmann::json j = gpu_identity_json(g);
    j["usage_milli_watts"] = field_json(g.power_usage_mw);
    j["enforced_limit_milli_watts"] = field_json(g.power_enforced_limit_mw);
    j["management_limit_milli_watts"] = field_json(g.power_management_limit_mw);
    j["used_percent"] = pct ? nlohmann::json(fmt::format("{:.2f}", *pct)) : nlohmann::json(nullptr);
    j["get_power_usage_supported"] = g.power_usage_mw.supported();
    j["get_power_limit_supported"] = g.power_enforced_limit_mw.supported();
    gpus.push_back(std::move(j));
    rows.push_back({std::to_string(g.index), watts(g.power_usage_mw),
                    watts(g.power_enforced_limit_mw), watts(g.power_management_limit_mw),
                    pct ? fmt::format("{:.2f}", *pct) : "n/a"});
  }
  return issues.result(
      kName,
      "all " + std::to_string(snapshot.gpus.size()) + " GPU(s) were checked, no power issue found",
      {{"gpus", gpus}}, format_table(rows));
}

PowerComponent::PowerComponent(const ComponentContext& ctx) : NvidiaComponent(ctx) {
  if (ctx.metrics == nullptr) return;
  ctx.metrics->describe(kUsage, "Current GPU power usage in milliwatts");
  ctx.metrics->describe(kEnforced, "Enforced GPU power limit in milliwatts");
  ctx.metrics->describe(kUsedPercent, "GPU power usage in percent of the enforced limit");
}

CheckResult PowerComponent::evaluate(const nvml::NvmlSnapshot& snapshot) {
  if (MetricRegistry* m = ctx().metrics) {
    for (const auto& g : snapshot.gpus) {
      Labels l = gpu_labels(g);
      if (g.power_usage_mw.ok()) m->set(kName, kUsage, g.power_usage_mw.value, l);
      if (g.power_enforced_limit_mw.ok())
        m->set(kName, kEnforced, g.power_enforced_limit_mw.value, l);
      if (auto pct = used_percent(g)) m->set(kName, kUsedPercent, *pct, l);
    }
  }
  return evaluate_power(snapshot);
}

}  // namespace gpud::components
