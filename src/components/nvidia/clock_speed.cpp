#include "components/nvidia/clock_speed.h"

namespace gpud::components {

namespace {
constexpr GpuMetric kMetrics[] = {
    {"accelerator_nvidia_clock_speed_graphics_mhz", "Current graphics clock in MHz",
     MetricKind::kGauge, read_metric<&nvml::GpuSnapshot::clock_graphics_mhz>},
    {"accelerator_nvidia_clock_speed_memory_mhz", "Current memory clock in MHz", MetricKind::kGauge,
     read_metric<&nvml::GpuSnapshot::clock_memory_mhz>},
    {"accelerator_nvidia_clock_speed_sm_mhz", "Current SM clock in MHz", MetricKind::kGauge,
     read_metric<&nvml::GpuSnapshot::clock_sm_mhz>},
};
}  // namespace

NvidiaVerdict evaluate_clock_speed(const nvml::NvmlSnapshot& snapshot) {
  NvidiaVerdict v;
  v.healthy_reason = "all " + std::to_string(snapshot.gpus.size()) +
                     " GPU(s) were checked, no clock speed issue found";
  v.columns = {"GRAPHICS MHz", "MEMORY MHz", "SM MHz"};
  for (const auto& g : snapshot.gpus) {
    v.usable(g, g.clock_graphics_mhz, "graphics clock");
    v.usable(g, g.clock_memory_mhz, "memory clock");
    v.usable(g, g.clock_sm_mhz, "SM clock");
    GpuRow& row = v.gpus.emplace_back(g);
    row.field("graphics_mhz", g.clock_graphics_mhz)
        .field("memory_mhz", g.clock_memory_mhz)
        .field("sm_mhz", g.clock_sm_mhz);
    row.data["clock_graphics_supported"] = g.clock_graphics_mhz.supported();
    row.data["clock_memory_supported"] = g.clock_memory_mhz.supported();
  }
  return v;
}

ClockSpeedComponent::ClockSpeedComponent(const ComponentContext& ctx)
    : NvidiaComponent(ctx, kMetrics) {}

CheckResult ClockSpeedComponent::evaluate(const nvml::NvmlSnapshot& snapshot) {
  return render_verdict(name(), evaluate_clock_speed(snapshot));
}

}  // namespace gpud::components
