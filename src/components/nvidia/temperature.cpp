#include "components/nvidia/temperature.h"

#include <fmt/format.h>

#include "components/nvidia/gpu_issues.h"

namespace gpud::components {

namespace {
constexpr const char* kName = "accelerator-nvidia-temperature";
constexpr const char* kCurrent = "accelerator_nvidia_temperature_current_celsius";
constexpr const char* kCurrentHbm = "accelerator_nvidia_temperature_current_hbm_celsius";
constexpr const char* kSlowdown = "accelerator_nvidia_temperature_slowdown_threshold_celsius";
constexpr const char* kMemMax = "accelerator_nvidia_temperature_mem_max_threshold_celsius";
constexpr const char* kSlowdownUsed = "accelerator_nvidia_temperature_slowdown_used_percent";
constexpr const char* kMemMaxUsed = "accelerator_nvidia_temperature_mem_max_used_percent";
constexpr const char* kMargin = "accelerator_nvidia_temperature_margin_celsius";

// current / threshold in percent; 0 when the threshold is unknown or 0 (GPUd's "0.0").
double used_percent(const nvml::Field<int>& current, const nvml::Field<uint32_t>& threshold) {
  if (!current.ok() || !threshold.ok() || threshold.value == 0) return 0.0;
  return 100.0 * current.value / threshold.value;
}
std::string pct(double v) { return fmt::format("{:.2f}", v); }
}  // namespace

CheckResult evaluate_temperature(const nvml::NvmlSnapshot& snapshot, int slowdown_margin_c) {
  GpuIssues issues;
  nlohmann::json gpus = nlohmann::json::array();
  std::vector<std::vector<std::string>> rows = {
      {"GPU", "CORE °C", "HBM °C", "MARGIN °C", "SLOWDOWN °C", "GPU MAX °C", "MEM MAX °C"}};
  for (const auto& g : snapshot.gpus) {
    issues.usable(g, g.temperature_c, "GPU temperature");
    issues.usable(g, g.temperature_hbm_c, "HBM temperature");
    issues.usable(g, g.margin_temperature_c, "margin temperature");
    issues.usable(g, g.threshold_shutdown_c, "shutdown threshold");
    issues.usable(g, g.threshold_slowdown_c, "slowdown threshold");
    issues.usable(g, g.threshold_mem_max_c, "mem max threshold");
    issues.usable(g, g.threshold_gpu_max_c, "GPU max threshold");
    std::string who = gpu_label(g);
    // GPUd's three rules, first match per GPU.
    if (slowdown_margin_c > 0 && g.margin_temperature_c.ok() && g.threshold_slowdown_c.ok() &&
        g.threshold_slowdown_c.value > 0 && g.margin_temperature_c.value > 0 &&
        g.margin_temperature_c.value <= slowdown_margin_c) {
      issues.add(Health::kDegraded,
                 fmt::format("margin threshold exceeded: {} has only {} °C margin left to "
                             "slowdown (threshold {} °C)",
                             who, g.margin_temperature_c.value, slowdown_margin_c));
    } else if (g.temperature_c.ok() && g.threshold_gpu_max_c.ok() &&
               g.threshold_gpu_max_c.value > 0 &&
               g.temperature_c.value > static_cast<int>(g.threshold_gpu_max_c.value)) {
      issues.add(Health::kDegraded,
                 fmt::format("GPU temperature anomalies: {} at {} °C is above the GPU max "
                             "threshold {} °C",
                             who, g.temperature_c.value, g.threshold_gpu_max_c.value));
    } else if (g.temperature_hbm_c.ok() && g.threshold_mem_max_c.ok() &&
               g.threshold_mem_max_c.value > 0 &&
               g.temperature_hbm_c.value > static_cast<int>(g.threshold_mem_max_c.value)) {
      issues.add(Health::kDegraded,
                 fmt::format("HBM temperature anomalies: {} HBM at {} °C is above the memory max "
                             "threshold {} °C",
                             who, g.temperature_hbm_c.value, g.threshold_mem_max_c.value));
    }
    nlohmann::json j = gpu_identity_json(g);
    j["current_celsius_gpu_core"] = field_json(g.temperature_c);
    j["current_celsius_hbm"] = field_json(g.temperature_hbm_c);
    j["hbm_temperature_supported"] = g.temperature_hbm_c.supported();
    j["margin_temperature_celsius"] = field_json(g.margin_temperature_c);
    j["margin_temperature_supported"] = g.margin_temperature_c.supported();
    j["threshold_celsius_slowdown_margin"] = slowdown_margin_c;
    j["threshold_celsius_shutdown"] = field_json(g.threshold_shutdown_c);
    j["threshold_celsius_slowdown"] = field_json(g.threshold_slowdown_c);
    j["threshold_celsius_mem_max"] = field_json(g.threshold_mem_max_c);
    j["threshold_celsius_gpu_max"] = field_json(g.threshold_gpu_max_c);
    j["used_percent_shutdown"] = pct(used_percent(g.temperature_c, g.threshold_shutdown_c));
    j["used_percent_slowdown"] = pct(used_percent(g.temperature_c, g.threshold_slowdown_c));
    j["used_percent_mem_max"] = pct(used_percent(g.temperature_hbm_c, g.threshold_mem_max_c));
    j["used_percent_gpu_max"] = pct(used_percent(g.temperature_c, g.threshold_gpu_max_c));
    gpus.push_back(std::move(j));
    rows.push_back({std::to_string(g.index), field_text(g.temperature_c),
                    field_text(g.temperature_hbm_c), field_text(g.margin_temperature_c),
                    field_text(g.threshold_slowdown_c), field_text(g.threshold_gpu_max_c),
                    field_text(g.threshold_mem_max_c)});
  }
  return issues.result(kName,
                       "all " + std::to_string(snapshot.gpus.size()) +
                           " GPU(s) were checked, no temperature issue found",
                       {{"gpus", gpus}}, format_table(rows));
}

TemperatureComponent::TemperatureComponent(const ComponentContext& ctx) : NvidiaComponent(ctx) {
  if (ctx.metrics == nullptr) return;
  ctx.metrics->describe(kCurrent, "Current GPU core temperature in °C");
  ctx.metrics->describe(kCurrentHbm, "Current HBM temperature in °C");
  ctx.metrics->describe(kSlowdown, "GPU slowdown temperature threshold in °C");
  ctx.metrics->describe(kMemMax, "HBM maximum temperature threshold in °C");
  ctx.metrics->describe(kSlowdownUsed, "GPU core temperature in percent of the slowdown threshold");
  ctx.metrics->describe(kMemMaxUsed, "HBM temperature in percent of the memory max threshold");
  ctx.metrics->describe(kMargin, "Degrees left before the GPU reaches its slowdown temperature");
}

CheckResult TemperatureComponent::evaluate(const nvml::NvmlSnapshot& snapshot) {
  if (MetricRegistry* m = ctx().metrics) {
    for (const auto& g : snapshot.gpus) {
      Labels l = gpu_labels(g);
      if (g.temperature_c.ok()) m->set(kName, kCurrent, g.temperature_c.value, l);
      if (g.temperature_hbm_c.ok()) m->set(kName, kCurrentHbm, g.temperature_hbm_c.value, l);
      if (g.threshold_slowdown_c.ok()) m->set(kName, kSlowdown, g.threshold_slowdown_c.value, l);
      if (g.threshold_mem_max_c.ok()) m->set(kName, kMemMax, g.threshold_mem_max_c.value, l);
      if (g.temperature_c.ok() && g.threshold_slowdown_c.ok())
        m->set(kName, kSlowdownUsed, used_percent(g.temperature_c, g.threshold_slowdown_c), l);
      if (g.temperature_hbm_c.ok() && g.threshold_mem_max_c.ok())
        m->set(kName, kMemMaxUsed, used_percent(g.temperature_hbm_c, g.threshold_mem_max_c), l);
      if (g.margin_temperature_c.ok()) m->set(kName, kMargin, g.margin_temperature_c.value, l);
    }
  }
  return evaluate_temperature(snapshot, config().threshold_celsius_slowdown_margin);
}

}  // namespace gpud::components
