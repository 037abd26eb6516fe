#include "components/nvidia/persistence_mode.h"

namespace gpud::components {

std::vector<const nvml::GpuSnapshot*> persistence_mode_disabled(
    const nvml::NvmlSnapshot& snapshot) {
  std::vector<const nvml::GpuSnapshot*> out;
  for (const auto& g : snapshot.gpus)
    if (g.persistence_mode.ok() && !g.persistence_mode.value) out.push_back(&g);
  return out;
}

NvidiaVerdict evaluate_persistence_mode(const nvml::NvmlSnapshot& snapshot) {
  NvidiaVerdict v;
  v.columns = {"UUID", "PERSISTENCE MODE"};
  std::vector<VerdictFinding> errors;
  size_t supported = 0;
  for (const auto& g : snapshot.gpus) {
    const auto& pm = g.persistence_mode;
    GpuRow& row = v.gpus.emplace_back(g.index, nlohmann::json{{"uuid", g.uuid.value},
                                                              {"bus_id", g.pci_bus_id.value},
                                                              {"name", g.name.value}});
    row.data["persistence_mode_supported"] = pm.supported();
    row.data["persistence_mode_enabled"] = pm.ok() && pm.value;
    row.cells = {g.uuid.value, pm.ok() ? (pm.value ? "enabled" : "disabled")
                                       : (pm.supported() ? "error: " + pm.error : "not supported")};
    if (pm.supported()) ++supported;
    if (pm.status == nvml::FieldStatus::kError)
      errors.push_back(
          VerdictFinding::about(g, Health::kUnhealthy, gpu_label(g) + ": " + pm.error));
  }
  auto disabled = persistence_mode_disabled(snapshot);
  // Nothing is broken and a reboot does not enable it: the node's setup is what to fix.
  const auto fix = RepairAction::kCheckUserAppAndGpu;
  v.action_description =
      "enable persistence mode: systemctl enable --now nvidia-persistenced (or nvidia-smi -pm 1); "
      "without it the driver tears the GPUs down between jobs";
  if (!disabled.empty() && disabled.size() == snapshot.gpus.size()) {
    v.add(Health::kUnhealthy,
          "all " + std::to_string(disabled.size()) + " GPU(s) disabled persistence mode", fix);
  } else {
    for (const auto* g : disabled)
      v.add(*g, Health::kUnhealthy, g->uuid.value + " persistence mode supported but not enabled",
            fix);
  }
  // Errors come after the disabled GPUs in the reason.
  v.findings.insert(v.findings.end(), errors.begin(), errors.end());
  v.healthy_reason = supported == 0
                         ? "persistence mode not supported (not applicable)"
                         : "persistence mode enabled on " + std::to_string(supported) + " GPU(s)";
  return v;
}

std::chrono::seconds PersistenceModeComponent::interval() const {
  return std::min(std::chrono::seconds(30), NvidiaComponent::interval());
}

CheckResult PersistenceModeComponent::evaluate(const nvml::NvmlSnapshot& snapshot) {
  std::set<std::string> now;
  for (const auto* g : persistence_mode_disabled(snapshot)) {
    now.insert(g->uuid.value);
    if (reported_.count(g->uuid.value) != 0) continue;
    Event e;
    e.component = std::string(kPersistenceModeName);
    e.time = snapshot.time == TimePoint{} ? Clock::now() : snapshot.time;
    e.name = "persistence_mode_disabled";
    e.type = EventType::kWarning;
    e.message = g->uuid.value + " persistence mode supported but not enabled";
    e.extra_info = {{"device_uuid", g->uuid.value}, {"device_bus_id", g->pci_bus_id.value}};
    record(std::move(e));
  }
  reported_ = std::move(now);  // a GPU re-enabled and disabled again is reported again
  return render_verdict(name(), evaluate_persistence_mode(snapshot));
}

}  // namespace gpud::components
