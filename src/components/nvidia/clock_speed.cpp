#include "components/nvidia/clock_speed.h"

#include "components/nvidia/gpu_issues.h"

namespace gpud::components {

namespace {
constexpr const char* kName = "accelerator-nvidia-clock-speed";
constexpr const char* kGraphics = "accelerator_nvidia_clock_speed_graphics_mhz";
constexpr const char* kMemory = "accelerator_nvidia_clock_speed_memory_mhz";
constexpr const char* kSm = "accelerator_nvidia_clock_speed_sm_mhz";
}  // namespace

CheckResult evaluate_clock_speed(const nvml::NvmlSnapshot& snapshot) {
  GpuIssues issues;
  nlohmann::json gpus = nlohmann::json::array();
  std::vector<std::vector<std::string>> rows = {{"GPU", "GRAPHICS MHz", "MEMORY MHz", "SM MHz"}};
  for (const auto& g : snapshot.gpus) {
    issues.usable(g, g.clock_graphics_mhz, "graphics clock");
    issues.usable(g, g.clock_memory_mhz, "memory clock");
    issues.usable(g, g.clock_sm_mhz, "SM clock");
    nlohmann::json j = gpu_identity_json(g);
    j["graphics_mhz"] = field_json(g.clock_graphics_mhz);
    j["memory_mhz"] = field_json(g.clock_memory_mhz);
    j["sm_mhz"] = field_json(g.clock_sm_mhz);
    j["clock_graphics_supported"] = g.clock_graphics_mhz.supported();
    j["clock_memory_supported"] = g.clock_memory_mhz.supported();
    gpus.push_back(std::move(j));
    rows.push_back({std::to_string(g.index), field_text(g.clock_graphics_mhz),
                    field_text(g.clock_memory_mhz), field_text(g.clock_sm_mhz)});
  }
  return issues.result(kName,
                       "all " + std::to_string(snapshot.gpus.size()) +
                           " GPU(s) were checked, no clock speed issue found",
                       {{"gpus", gpus}}, format_table(rows));
}

ClockSpeedComponent::ClockSpeedComponent(const ComponentContext& ctx) : NvidiaComponent(ctx) {
  if (ctx.metrics == nullptr) return;
  ctx.metrics->describe(kGraphics, "Current graphics clock in MHz");
  ctx.metrics->describe(kMemory, "Current memory clock in MHz");
  ctx.metrics->describe(kSm, "Current SM clock in MHz");
}

CheckResult ClockSpeedComponent::evaluate(const nvml::NvmlSnapshot& snapshot) {
  if (MetricRegistry* m = ctx().metrics) {
    for (const auto& g : snapshot.gpus) {
      Labels l = gpu_labels(g);
      if (g.clock_graphics_mhz.ok()) m->set(kName, kGraphics, g.clock_graphics_mhz.value, l);
      if (g.clock_memory_mhz.ok()) m->set(kName, kMemory, g.clock_memory_mhz.value, l);
      if (g.clock_sm_mhz.ok()) m->set(kName, kSm, g.clock_sm_mhz.value, l);
    }
  }
  return evaluate_clock_speed(snapshot);
}

}  // namespace gpud::components
