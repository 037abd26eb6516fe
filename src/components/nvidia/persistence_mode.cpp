#include "components/nvidia/persistence_mode.h"

#include "components/nvidia/gpu_issues.h"

namespace gpud::components {

PersistenceModeVerdict evaluate_persistence_mode(const nvml::NvmlSnapshot& snapshot) {
  PersistenceModeVerdict v;
  nlohmann::json gpus = nlohmann::json::array();
  std::vector<std::vector<std::string>> rows = {{"GPU", "UUID", "PERSISTENCE MODE"}};
  std::string errors;
  size_t supported = 0;
  for (const auto& g : snapshot.gpus) {
    const auto& pm = g.persistence_mode;
    std::string state = pm.ok() ? (pm.value ? "enabled" : "disabled")
                                : (pm.supported() ? "error: " + pm.error : "not supported");
    gpus.push_back({{"uuid", g.uuid.value},
                    {"bus_id", g.pci_bus_id.value},
                    {"name", g.name.value},
                    {"persistence_mode_supported", pm.supported()},
                    {"persistence_mode_enabled", pm.ok() && pm.value}});
    rows.push_back({std::to_string(g.index), g.uuid.value, state});
    if (pm.supported()) ++supported;
    if (pm.status == nvml::FieldStatus::kError) {
      errors += (errors.empty() ? "" : "; ") + gpu_label(g) + ": " + pm.error;
    } else if (pm.ok() && !pm.value) {
      v.disabled.push_back(&g);
    }
  }
  nlohmann::json data = {{"gpus", gpus}};
  std::string detail = format_table(rows);
  std::string reason;
  Health h = Health::kHealthy;
  if (!v.disabled.empty()) {
    h = Health::kUnhealthy;
    if (v.disabled.size() == snapshot.gpus.size()) {
      reason = "all " + std::to_string(v.disabled.size()) + " GPU(s) disabled persistence mode";
    } else {
      for (const auto* g : v.disabled)
        reason += (reason.empty() ? "" : "; ") + g->uuid.value +
                  " persistence mode supported but not enabled";
    }
  }
  if (!errors.empty()) {
    h = Health::kUnhealthy;
    reason += (reason.empty() ? "" : "; ") + errors;
  }
  if (reason.empty()) {
    reason = supported == 0
                 ? "persistence mode not supported (not applicable)"
                 : "persistence mode enabled on " + std::to_string(supported) + " GPU(s)";
  }
  v.result = data_result(kPersistenceModeName, h, reason, data, detail);
  return v;
}

std::chrono::seconds PersistenceModeComponent::interval() const {
  return std::min(std::chrono::seconds(30), NvidiaComponent::interval());
}

CheckResult PersistenceModeComponent::evaluate(const nvml::NvmlSnapshot& snapshot) {
  auto v = evaluate_persistence_mode(snapshot);
  std::set<std::string> now;
  for (const auto* g : v.disabled) {
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
  return std::move(v.result);
}

}  // namespace gpud::components
