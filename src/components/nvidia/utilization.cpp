#include "components/nvidia/utilization.h"

namespace gpud::components {

namespace {

constexpr GpuMetric kMetrics[] = {
    {"accelerator_nvidia_utilization_gpu_util_percent", "GPU utilization in percent",
     MetricKind::kGauge,
     read_metric<&nvml::GpuSnapshot::utilization, &nvml::Utilization::gpu_percent>},
    {"accelerator_nvidia_utilization_memory_util_percent",
     "GPU memory (bandwidth) utilization in percent", MetricKind::kGauge,
     read_metric<&nvml::GpuSnapshot::utilization, &nvml::Utilization::memory_percent>},
};

}  // namespace

NvidiaVerdict evaluate_utilization(const nvml::NvmlSnapshot& snapshot) {
  NvidiaVerdict v;
  v.healthy_reason = "all " + std::to_string(snapshot.gpus.size()) +
                     " GPU(s) were checked, no utilization issue found";
  v.columns = {"GPU UTIL %", "MEMORY UTIL %"};
  for (const auto& g : snapshot.gpus) {
    GpuRow& row = v.gpus.emplace_back(g);
    row.data["supported"] = g.utilization.supported();
    if (v.usable(g, g.utilization, "utilization")) {
      row.data["gpu_used_percent"] = g.utilization.value.gpu_percent;
      row.data["memory_used_percent"] = g.utilization.value.memory_percent;
      row.cells = {std::to_string(g.utilization.value.gpu_percent),
                   std::to_string(g.utilization.value.memory_percent)};
    } else {
      row.cells.assign(v.columns.size(), unread_text(g.utilization));
    }
  }
  return v;
}

UtilizationComponent::UtilizationComponent(const ComponentContext& ctx)
    : NvidiaComponent(ctx, kMetrics) {}

CheckResult UtilizationComponent::evaluate(const nvml::NvmlSnapshot& snapshot) {
  return render_verdict(name(), evaluate_utilization(snapshot));
}

}  // namespace gpud::components
