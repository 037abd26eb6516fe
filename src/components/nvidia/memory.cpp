#include "components/nvidia/memory.h"

#include <fmt/format.h>

namespace gpud::components {

namespace {

double used_percent(const nvml::Memory& m) {
  return m.total_bytes == 0 ? 0.0 : 100.0 * m.used_bytes / m.total_bytes;
}
std::string gib(uint64_t bytes) { return fmt::format("{:.1f}", bytes / 1073741824.0); }

constexpr GpuMetric kMetrics[] = {
    {"accelerator_nvidia_memory_total_bytes", "Total GPU memory in bytes", MetricKind::kGauge,
     read_metric<&nvml::GpuSnapshot::memory, &nvml::Memory::total_bytes>},
    {"accelerator_nvidia_memory_reserved_bytes", "GPU memory reserved by the driver in bytes",
     MetricKind::kGauge, read_metric<&nvml::GpuSnapshot::memory, &nvml::Memory::reserved_bytes>},
    {"accelerator_nvidia_memory_used_bytes", "Used GPU memory in bytes", MetricKind::kGauge,
     read_metric<&nvml::GpuSnapshot::memory, &nvml::Memory::used_bytes>},
    {"accelerator_nvidia_memory_free_bytes", "Free GPU memory in bytes", MetricKind::kGauge,
     read_metric<&nvml::GpuSnapshot::memory, &nvml::Memory::free_bytes>},
    {"accelerator_nvidia_memory_used_percent", "Used GPU memory in percent of the total",
     MetricKind::kGauge,
     [](const nvml::GpuSnapshot& g) {
       return g.memory.ok() ? std::optional<double>(used_percent(g.memory.value)) : std::nullopt;
     }},
};

}  // namespace

NvidiaVerdict evaluate_gpu_memory(const nvml::NvmlSnapshot& snapshot) {
  NvidiaVerdict v;
  v.healthy_reason =
      "all " + std::to_string(snapshot.gpus.size()) + " GPU(s) were checked, no memory issue found";
  v.columns = {"TOTAL GiB", "RESERVED GiB", "USED GiB", "FREE GiB", "USED %"};
  for (const auto& g : snapshot.gpus) {
    GpuRow& row = v.gpus.emplace_back(g);
    row.data["supported"] = g.memory.supported();
    if (v.usable(g, g.memory, "memory info")) {
      const nvml::Memory& m = g.memory.value;
      row.data["total_bytes"] = m.total_bytes;
      row.data["reserved_bytes"] = m.reserved_bytes;
      row.data["used_bytes"] = m.used_bytes;
      row.data["free_bytes"] = m.free_bytes;
      row.data["used_percent"] = fmt::format("{:.2f}", used_percent(m));
      row.cells = {gib(m.total_bytes), gib(m.reserved_bytes), gib(m.used_bytes), gib(m.free_bytes),
                   fmt::format("{:.2f}", used_percent(m))};
    } else {
      row.cells.assign(v.columns.size(), unread_text(g.memory));
    }
  }
  return v;
}

GpuMemoryComponent::GpuMemoryComponent(const ComponentContext& ctx)
    : NvidiaComponent(ctx, kMetrics) {}

CheckResult GpuMemoryComponent::evaluate(const nvml::NvmlSnapshot& snapshot) {
  return render_verdict(name(), evaluate_gpu_memory(snapshot));
}

}  // namespace gpud::components
