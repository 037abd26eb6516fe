#include "components/nvidia/temperature.h"

#include <fmt/format.h>

namespace gpud::components {

namespace {

// current / threshold in percent; 0 when the threshold is unknown or 0 (GPUd's "0.0").
double used_percent(const nvml::Field<int>& current, const nvml::Field<uint32_t>& threshold) {
  if (!current.ok() || !threshold.ok() || threshold.value == 0) return 0.0;
  return 100.0 * current.value / threshold.value;
}
// The same as a metric: only when both were read.
std::optional<double> used_percent_metric(const nvml::Field<int>& current,
                                          const nvml::Field<uint32_t>& threshold) {
  if (!current.ok() || !threshold.ok()) return std::nullopt;
  return used_percent(current, threshold);
}
std::string pct(double v) { return fmt::format("{:.2f}", v); }

constexpr GpuMetric kMetrics[] = {
    {"accelerator_nvidia_temperature_current_celsius", "Current GPU core temperature in °C",
     MetricKind::kGauge, read_metric<&nvml::GpuSnapshot::temperature_c>},
    {"accelerator_nvidia_temperature_current_hbm_celsius", "Current HBM temperature in °C",
     MetricKind::kGauge, read_metric<&nvml::GpuSnapshot::temperature_hbm_c>},
    {"accelerator_nvidia_temperature_slowdown_threshold_celsius",
     "GPU slowdown temperature threshold in °C", MetricKind::kGauge,
     read_metric<&nvml::GpuSnapshot::threshold_slowdown_c>},
    {"accelerator_nvidia_temperature_mem_max_threshold_celsius",
     "HBM maximum temperature threshold in °C", MetricKind::kGauge,
     read_metric<&nvml::GpuSnapshot::threshold_mem_max_c>},
    {"accelerator_nvidia_temperature_slowdown_used_percent",
     "GPU core temperature in percent of the slowdown threshold", MetricKind::kGauge,
     [](const nvml::GpuSnapshot& g) {
       return used_percent_metric(g.temperature_c, g.threshold_slowdown_c);
     }},
    {"accelerator_nvidia_temperature_mem_max_used_percent",
     "HBM temperature in percent of the memory max threshold", MetricKind::kGauge,
     [](const nvml::GpuSnapshot& g) {
       return used_percent_metric(g.temperature_hbm_c, g.threshold_mem_max_c);
     }},
    {"accelerator_nvidia_temperature_margin_celsius",
     "Degrees left before the GPU reaches its slowdown temperature", MetricKind::kGauge,
     read_metric<&nvml::GpuSnapshot::margin_temperature_c>},
};

}  // namespace

NvidiaVerdict evaluate_temperature(const nvml::NvmlSnapshot& snapshot, int slowdown_margin_c) {
  NvidiaVerdict v;
  v.healthy_reason = "all " + std::to_string(snapshot.gpus.size()) +
                     " GPU(s) were checked, no temperature issue found";
  v.columns = {"CORE °C", "HBM °C", "MARGIN °C", "SLOWDOWN °C", "GPU MAX °C", "MEM MAX °C"};
  for (const auto& g : snapshot.gpus) {
    v.usable(g, g.temperature_c, "GPU temperature");
    v.usable(g, g.temperature_hbm_c, "HBM temperature");
    v.usable(g, g.margin_temperature_c, "margin temperature");
    v.usable(g, g.threshold_shutdown_c, "shutdown threshold");
    v.usable(g, g.threshold_slowdown_c, "slowdown threshold");
    v.usable(g, g.threshold_mem_max_c, "mem max threshold");
    v.usable(g, g.threshold_gpu_max_c, "GPU max threshold");
    std::string who = gpu_label(g);
    // GPUd's three rules, first match per GPU.
    if (slowdown_margin_c > 0 && g.margin_temperature_c.ok() && g.threshold_slowdown_c.ok() &&
        g.threshold_slowdown_c.value > 0 && g.margin_temperature_c.value > 0 &&
        g.margin_temperature_c.value <= slowdown_margin_c) {
      v.add(g, Health::kDegraded,
            fmt::format("margin threshold exceeded: {} has only {} °C margin left to "
                        "slowdown (threshold {} °C)",
                        who, g.margin_temperature_c.value, slowdown_margin_c));
    } else if (g.temperature_c.ok() && g.threshold_gpu_max_c.ok() &&
               g.threshold_gpu_max_c.value > 0 &&
               g.temperature_c.value > static_cast<int>(g.threshold_gpu_max_c.value)) {
      v.add(g, Health::kDegraded,
            fmt::format("GPU temperature anomalies: {} at {} °C is above the GPU max "
                        "threshold {} °C",
                        who, g.temperature_c.value, g.threshold_gpu_max_c.value));
    } else if (g.temperature_hbm_c.ok() && g.threshold_mem_max_c.ok() &&
               g.threshold_mem_max_c.value > 0 &&
               g.temperature_hbm_c.value > static_cast<int>(g.threshold_mem_max_c.value)) {
      v.add(g, Health::kDegraded,
            fmt::format("HBM temperature anomalies: {} HBM at {} °C is above the memory max "
                        "threshold {} °C",
                        who, g.temperature_hbm_c.value, g.threshold_mem_max_c.value));
    }
    GpuRow& row = v.gpus.emplace_back(g);
    row.field("current_celsius_gpu_core", g.temperature_c)
        .field("current_celsius_hbm", g.temperature_hbm_c)
        .field("margin_temperature_celsius", g.margin_temperature_c)
        .field("threshold_celsius_slowdown", g.threshold_slowdown_c)
        .field("threshold_celsius_gpu_max", g.threshold_gpu_max_c)
        .field("threshold_celsius_mem_max", g.threshold_mem_max_c);
    auto& j = row.data;
    j["hbm_temperature_supported"] = g.temperature_hbm_c.supported();
    j["margin_temperature_supported"] = g.margin_temperature_c.supported();
    j["threshold_celsius_slowdown_margin"] = slowdown_margin_c;
    j["threshold_celsius_shutdown"] = field_json(g.threshold_shutdown_c);
    j["used_percent_shutdown"] = pct(used_percent(g.temperature_c, g.threshold_shutdown_c));
    j["used_percent_slowdown"] = pct(used_percent(g.temperature_c, g.threshold_slowdown_c));
    j["used_percent_mem_max"] = pct(used_percent(g.temperature_hbm_c, g.threshold_mem_max_c));
    j["used_percent_gpu_max"] = pct(used_percent(g.temperature_c, g.threshold_gpu_max_c));
  }
  return v;
}

TemperatureComponent::TemperatureComponent(const ComponentContext& ctx)
    : NvidiaComponent(ctx, kMetrics) {}

CheckResult TemperatureComponent::evaluate(const nvml::NvmlSnapshot& snapshot) {
  return render_verdict(name(),
                        evaluate_temperature(snapshot, config().threshold_celsius_slowdown_margin));
}

}  // namespace gpud::components
