#include "components/nvidia/gpu_health.h"

#include <algorithm>

#include "components/nvidia/nvidia_component.h"
#include "core/pci_address.h"
#include "core/strings.h"

namespace gpud::components {

namespace {

// extra_info[key] as a JSON array; empty when absent or not an array.
nlohmann::json array_of(const HealthState& s, const char* key) {
  auto it = s.extra_info.find(key);
  if (it == s.extra_info.end()) return nlohmann::json::array();
  auto j = nlohmann::json::parse(it->second, nullptr, false);
  return j.is_array() ? j : nlohmann::json::array();
}

std::string text_of(const nlohmann::json& o, const char* key) {
  auto it = o.find(key);
  return it != o.end() && it->is_string() ? it->get<std::string>() : std::string();
}

}  // namespace

std::vector<GpuHealth> gpu_health(const nvml::NvmlSnapshot& identity,
                                  const std::vector<HealthState>& states) {
  std::vector<GpuHealth> out;
  for (const auto& g : identity.gpus) {
    GpuHealth h;
    h.index = g.index;
    h.uuid = g.uuid.ok() ? g.uuid.value : "";
    h.pci_bus_id = g.pci_bus_id.ok() ? g.pci_bus_id.value : "";
    out.push_back(std::move(h));
  }
  auto add = [](GpuHealth& gpu, const HealthState& s, Health health, std::string reason,
                const std::string& action = {}, bool injected = false) {
    if (health == Health::kHealthy) return;
    std::optional<RepairAction> a = parse_repair_action(action);
    if (!a && s.suggested_actions && !s.suggested_actions->repair_actions.empty())
      a = s.suggested_actions->repair_actions.front();
    gpu.causes.push_back({s.component, health, std::move(reason), a, injected});
  };
  for (const HealthState& s : states) {
    for (const auto& f : array_of(s, "gpu_findings")) {
      if (!f.is_object() || !f.contains("gpu") || !f["gpu"].is_number_unsigned()) continue;
      auto index = f["gpu"].get<unsigned int>();
      auto health = parse_health(text_of(f, "health"));
      for (auto& gpu : out)
        if (gpu.index == index && health)
          add(gpu, s, *health, text_of(f, "reason"), text_of(f, "suggested_action"));
    }
    for (const auto& d : array_of(s, "devices")) {
      if (!d.is_object()) continue;
      const std::string bus = normalize_pci_bus_id(text_of(d, "pci_bus_id"));
      auto health = parse_health(text_of(d, "health"));
      for (auto& gpu : out)
        if (!bus.empty() && normalize_pci_bus_id(gpu.pci_bus_id) == bus && health)
          add(gpu, s, *health, text_of(d, "reason"), text_of(d, "suggested_action"),
              d.value("injected", nlohmann::json(false)) == true);
    }
    // A fault of NVML itself (missing, failed, hung) is every GPU's.
    if (s.component == kNvmlFaultOwner && s.health != Health::kHealthy &&
        s.extra_info.count("gpu_findings") == 0)
      for (auto& gpu : out) add(gpu, s, s.health, s.reason);
  }
  for (auto& gpu : out) {
    std::stable_sort(gpu.causes.begin(), gpu.causes.end(), [](const auto& a, const auto& b) {
      return severity(a.health) > severity(b.health);
    });
    if (!gpu.causes.empty()) gpu.health = gpu.causes.front().health;
  }
  return out;
}

nlohmann::json to_json(const std::vector<GpuHealth>& gpus) {
  nlohmann::json out = nlohmann::json::array();
  for (const auto& g : gpus) {
    nlohmann::json reasons = nlohmann::json::array();
    for (const auto& c : g.causes)
      reasons.push_back({{"component", c.component},
                         {"health", std::string(to_string(c.health))},
                         {"reason", c.reason}});
    out.push_back({{"index", g.index},
                   {"uuid", g.uuid},
                   {"pci_bus_id", g.pci_bus_id},
                   {"health", std::string(to_string(g.health))},
                   {"reasons", std::move(reasons)}});
  }
  return out;
}

void publish_gpu_health(MetricRegistry& metrics, const std::vector<GpuHealth>& gpus) {
  static constexpr Health kAll[] = {Health::kHealthy, Health::kDegraded, Health::kUnhealthy,
                                    Health::kInitializing};
  std::vector<std::pair<Labels, double>> series;
  for (const auto& g : gpus)
    for (Health h : kAll)
      series.emplace_back(Labels{{"gpu", std::to_string(g.index)},
                                 {"uuid", g.uuid},
                                 {"pci_bus_id", g.pci_bus_id},
                                 {"health", std::string(to_string(h))}},
                          h == g.health ? 1.0 : 0.0);
  metrics.replace_series("", kGpuHealthMetric, series);
  std::vector<std::pair<Labels, double>> causes;
  for (const auto& g : gpus)
    for (const auto& c : g.causes) {
      causes.emplace_back(
          Labels{{"gpu", std::to_string(g.index)},
                 {"uuid", g.uuid},
                 {"pci_bus_id", g.pci_bus_id},
                 {"component", c.component},
                 {"health", std::string(to_string(c.health))},
                 {"suggested_action", c.action ? std::string(to_string(*c.action)) : ""},
                 {"reason", std::string(utf8_prefix(c.reason, kGpuHealthCauseReasonBytes))}},
          1.0);
      if (c.injected) causes.back().first["injected"] = "true";
    }
  metrics.replace_series("", kGpuHealthCauseMetric, causes);
}

}  // namespace gpud::components
