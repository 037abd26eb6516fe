#include "components/nvidia/utilization.h"

#include "components/nvidia/gpu_issues.h"

namespace gpud::components {

namespace {
constexpr const char* kName = "accelerator-nvidia-utilization";
constexpr const char* kGpu = "accelerator_nvidia_utilization_gpu_util_percent";
constexpr const char* kMemory = "accelerator_nvidia_utilization_memory_util_percent";
}  // namespace

CheckResult evaluate_utilization(const nvml::NvmlSnapshot& snapshot) {
  GpuIssues issues;
  nlohmann::json gpus = nlohmann::json::array();
  std::vector<std::vector<std::string>> rows = {{"GPU", "GPU UTIL %", "MEMORY UTIL %"}};
  for (const auto& g : snapshot.gpus) {
    nlohmann::json j = gpu_identity_json(g);
    j["supported"] = g.utilization.supported();
    if (issues.usable(g, g.utilization, "utilization")) {
      j["gpu_used_percent"] = g.utilization.value.gpu_percent;
      j["memory_used_percent"] = g.utilization.value.memory_percent;
      rows.push_back({std::to_string(g.index), std::to_string(g.utilization.value.gpu_percent),
                      std::to_string(g.utilization.value.memory_percent)});
    } else {
      std::string t = g.utilization.supported() ? "error" : "n/a";
      rows.push_back({std::to_string(g.index), t, t});
    }
    gpus.push_back(std::move(j));
  }
  return issues.result(kName,
                       "all " + std::to_string(snapshot.gpus.size()) +
                           " GPU(s) were checked, no utilization issue found",
                       {{"gpus", gpus}}, format_table(rows));
}

UtilizationComponent::UtilizationComponent(const ComponentContext& ctx) : NvidiaComponent(ctx) {
  if (ctx.metrics == nullptr) return;
  ctx.metrics->describe(kGpu, "GPU utilization in percent");
  ctx.metrics->describe(kMemory, "GPU memory (bandwidth) utilization in percent");
}

CheckResult UtilizationComponent::evaluate(const nvml::NvmlSnapshot& snapshot) {
  if (MetricRegistry* m = ctx().metrics) {
    for (const auto& g : snapshot.gpus) {
      if (!g.utilization.ok()) continue;
      Labels l = gpu_labels(g);
      m->set(kName, kGpu, g.utilization.value.gpu_percent, l);
      m->set(kName, kMemory, g.utilization.value.memory_percent, l);
    }
  }
  return evaluate_utilization(snapshot);
}

}  // namespace gpud::components
