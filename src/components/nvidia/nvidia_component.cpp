#include "components/nvidia/nvidia_component.h"

namespace gpud::components {

NvidiaComponent::NvidiaComponent(const ComponentContext& ctx, std::span<const GpuMetric> metrics)
    : Component(ctx), metrics_(metrics) {
  if (ctx.metrics == nullptr) return;
  for (const auto& m : metrics_) ctx.metrics->describe(m.name, m.help, m.kind);
}

std::vector<std::string> NvidiaComponent::tags() const {
  return {"accelerator", "gpu", "nvidia", std::string(name())};
}

bool NvidiaComponent::supported() const {
  if (ctx().nvidia == nullptr) return false;
  return ctx().nvidia->status() != nvml::NvmlStatus::kNotFound;
}

CheckResult NvidiaComponent::check() {
  auto status = source().status();
  auto snap =
      status == nvml::NvmlStatus::kReady
          ? source().snapshot()
          : Result<std::shared_ptr<const nvml::NvmlSnapshot>>(make_error(source().message()));
  if (ctx().metrics != nullptr && !metrics_.empty()) {
    const nvml::NvmlSnapshot* published = snap && publishes_metrics(**snap) ? snap->get() : nullptr;
    publish_gpu_metrics(*ctx().metrics, name(), metrics_, published);
  }
  if (auto early = nvidia_preamble(name(), status, source().message(), snap)) return *early;
  return evaluate(**snap);
}

void publish_gpu_metrics(MetricRegistry& registry, std::string_view component,
                         std::span<const GpuMetric> metrics, const nvml::NvmlSnapshot* snapshot) {
  for (const auto& m : metrics) {
    std::vector<std::pair<Labels, double>> series;
    if (snapshot != nullptr)
      for (const auto& g : snapshot->gpus)
        if (auto v = m.read(g)) series.emplace_back(gpu_labels(g), *v);
    registry.replace_series(component, m.name, series);
  }
}

std::optional<CheckResult> nvidia_preamble(
    std::string_view component, nvml::NvmlStatus status, const std::string& status_message,
    const Result<std::shared_ptr<const nvml::NvmlSnapshot>>& snap) {
  SuggestedActions reboot{"", {RepairAction::kRebootSystem}};
  if (status == nvml::NvmlStatus::kNotFound)
    return single_state(component, Health::kHealthy, "no NVIDIA GPU / NVML not found");
  if (status == nvml::NvmlStatus::kErrored)
    return single_state(component, Health::kUnhealthy, status_message, reboot);
  if (!snap) {
    auto r = single_state(component, Health::kUnhealthy, snap.error().message, reboot);
    r.states[0].error = snap.error().message;
    return r;
  }
  std::string lost;
  for (const auto& g : (*snap)->gpus) {
    if (!g.lost && !g.reset_required) continue;
    if (!lost.empty()) lost += "; ";
    lost += gpu_label(g) + (g.lost ? " GPU lost" : " GPU requires reset");
  }
  if (!lost.empty()) return single_state(component, Health::kUnhealthy, lost, reboot);
  return std::nullopt;
}

std::string product_of(const nvml::NvmlSnapshot& snapshot) {
  for (const auto& g : snapshot.gpus)
    if (g.name.ok()) return g.name.value;
  return "";
}

catalog::ProductCaps caps_of(const nvml::NvmlSnapshot& snapshot) {
  return catalog::product_caps(product_of(snapshot));
}

std::string gpu_label(const nvml::GpuSnapshot& gpu) {
  std::string s = "GPU " + std::to_string(gpu.index);
  if (gpu.pci_bus_id.ok()) s += " (" + gpu.pci_bus_id.value + ")";
  return s;
}

Labels gpu_labels(const nvml::GpuSnapshot& gpu) {
  return {{"uuid", gpu.uuid.ok() ? gpu.uuid.value : ""},
          {"gpu", std::to_string(gpu.index)},
          {"pci_bus_id", gpu.pci_bus_id.ok() ? gpu.pci_bus_id.value : ""}};
}

}  // namespace gpud::components
