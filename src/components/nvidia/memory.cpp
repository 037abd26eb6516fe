#include "components/nvidia/memory.h"

#include <fmt/format.h>

#include "components/nvidia/gpu_issues.h"

namespace gpud::components {

namespace {
constexpr const char* kName = "accelerator-nvidia-memory";
constexpr const char* kTotal = "accelerator_nvidia_memory_total_bytes";
constexpr const char* kReserved = "accelerator_nvidia_memory_reserved_bytes";
constexpr const char* kUsed = "accelerator_nvidia_memory_used_bytes";
constexpr const char* kFree = "accelerator_nvidia_memory_free_bytes";
constexpr const char* kUsedPercent = "accelerator_nvidia_memory_used_percent";

double used_percent(const nvml::Memory& m) {
  return m.total_bytes == 0 ? 0.0 : 100.0 * m.used_bytes / m.total_bytes;
}
std::string gib(uint64_t bytes) { return fmt::format("{:.1f}", bytes / 1073741824.0); }
}  // namespace

CheckResult evaluate_gpu_memory(const nvml::NvmlSnapshot& snapshot) {
  GpuIssues issues;
  nlohmann::json gpus = nlohmann::json::array();
  std::vector<std::vector<std::string>> rows = {
      {"GPU", "TOTAL GiB", "RESERVED GiB", "USED GiB", "FREE GiB", "USED %"}};
  for (const auto& g : snapshot.gpus) {
    nlohmann::json j = gpu_identity_json(g);
    j["supported"] = g.memory.supported();
    if (issues.usable(g, g.memory, "memory info")) {
      const nvml::Memory& m = g.memory.value;
      j["total_bytes"] = m.total_bytes;
      j["reserved_bytes"] = m.reserved_bytes;
      j["used_bytes"] = m.used_bytes;
      j["free_bytes"] = m.free_bytes;
      j["used_percent"] = fmt::format("{:.2f}", used_percent(m));
      rows.push_back({std::to_string(g.index), gib(m.total_bytes), gib(m.reserved_bytes),
                      gib(m.used_bytes), gib(m.free_bytes),
                      fmt::format("{:.2f}", used_percent(m))});
    } else {
      std::string t = g.memory.supported() ? "error" : "n/a";
      rows.push_back({std::to_string(g.index), t, t, t, t, t});
    }
    gpus.push_back(std::move(j));
  }
  return issues.result(
      kName,
      "all " + std::to_string(snapshot.gpus.size()) + " GPU(s) were checked, no memory issue found",
      {{"gpus", gpus}}, format_table(rows));
}

GpuMemoryComponent::GpuMemoryComponent(const ComponentContext& ctx) : NvidiaComponent(ctx) {
  if (ctx.metrics == nullptr) return;
  ctx.metrics->describe(kTotal, "Total GPU memory in bytes");
  ctx.metrics->describe(kReserved, "GPU memory reserved by the driver in bytes");
  ctx.metrics->describe(kUsed, "Used GPU memory in bytes");
  ctx.metrics->describe(kFree, "Free GPU memory in bytes");
  ctx.metrics->describe(kUsedPercent, "Used GPU memory in percent of the total");
}

CheckResult GpuMemoryComponent::evaluate(const nvml::NvmlSnapshot& snapshot) {
  if (MetricRegistry* m = ctx().metrics) {
    for (const auto& g : snapshot.gpus) {
      if (!g.memory.ok()) continue;
      Labels l = gpu_labels(g);
      const nvml::Memory& mem = g.memory.value;
      m->set(kName, kTotal, static_cast<double>(mem.total_bytes), l);
      m->set(kName, kReserved, static_cast<double>(mem.reserved_bytes), l);
      m->set(kName, kUsed, static_cast<double>(mem.used_bytes), l);
      m->set(kName, kFree, static_cast<double>(mem.free_bytes), l);
      m->set(kName, kUsedPercent, used_percent(mem), l);
    }
  }
  return evaluate_gpu_memory(snapshot);
}

}  // namespace gpud::components
