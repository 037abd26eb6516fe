#include "components/nvidia/gpu_health.h"

#include <algorithm>

#include "core/pci_address.h"
#include "core/strings.h"

namespace gpud::components {

namespace {

// Whether `subject` is about `gpu`: the same index, UUID or bus id, or every GPU.
bool about(const Subject& subject, const GpuHealth& gpu) {
  if (subject.kind != Subject::Kind::kGpu) return false;
  if (subject.is_every_gpu()) return true;
  if (subject.index) return *subject.index == gpu.index;
  if (!subject.uuid.empty()) return subject.uuid == gpu.uuid;
  return !gpu.pci_bus_id.empty() &&
         normalize_pci_bus_id(subject.bus_id) == normalize_pci_bus_id(gpu.pci_bus_id);
}

// Whether a data row (a component's "gpus" entry) is `gpu`'s: by its index, else its UUID, else
// its bus id (some components' rows carry no index).
bool row_of(const nlohmann::json& row, const GpuHealth& gpu) {
  if (auto i = row.find("index"); i != row.end())
    return i->is_number_unsigned() && i->get<unsigned int>() == gpu.index;
  if (auto u = row.find("uuid");
      u != row.end() && u->is_string() && !u->get_ref<const std::string&>().empty())
    return u->get_ref<const std::string&>() == gpu.uuid;
  auto b = row.find("bus_id");
  return b != row.end() && b->is_string() && !gpu.pci_bus_id.empty() &&
         normalize_pci_bus_id(b->get<std::string>()) == normalize_pci_bus_id(gpu.pci_bus_id);
}

}  // namespace

std::vector<GpuHealth> gpu_health(const nvml::NvmlSnapshot& identity,
                                  const std::vector<HealthState>& states, GpuValues values) {
  std::vector<const HealthState*> pointers;
  pointers.reserve(states.size());
  for (const HealthState& s : states) pointers.push_back(&s);
  return gpu_health(identity, pointers, values);
}

std::vector<GpuHealth> gpu_health(const nvml::NvmlSnapshot& identity,
                                  const std::vector<const HealthState*>& states, GpuValues values) {
  std::vector<GpuHealth> out;
  for (const auto& g : identity.gpus) {
    GpuHealth h;
    h.index = g.index;
    h.uuid = g.uuid.ok() ? g.uuid.value : "";
    h.pci_bus_id = g.pci_bus_id.ok() ? g.pci_bus_id.value : "";
    out.push_back(std::move(h));
  }
  for (const HealthState* state : states) {
    const HealthState& s = *state;
    for (const Finding& f : s.findings)
      for (auto& gpu : out) {
        if (!about(f.subject, gpu)) continue;
        // Another component's fault kept this one from checking: not a cause of its own.
        if (f.blocked_by && *f.blocked_by != s.component) {
          gpu.blocked_by.push_back({s.component, f.reason, *f.blocked_by});
          continue;
        }
        if (f.health == Health::kHealthy) continue;
        std::optional<RepairAction> action = f.action;
        if (!action && s.suggested_actions && !s.suggested_actions->repair_actions.empty())
          action = s.suggested_actions->repair_actions.front();
        gpu.causes.push_back({s.component, f.health, f.reason, action, f.injected});
      }
    if (values == GpuValues::kWithout || !s.data.is_object()) continue;
    auto rows = s.data.find("gpus");
    if (rows == s.data.end() || !rows->is_array()) continue;
    for (const auto& row : *rows) {
      if (!row.is_object()) continue;
      for (auto& gpu : out)
        if (row_of(row, gpu)) {
          nlohmann::json v = row;
          for (const char* key : {"index", "uuid", "bus_id"}) v.erase(key);
          if (!v.empty()) gpu.values[s.component] = std::move(v);
        }
    }
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
    for (const auto& c : g.causes) {
      reasons.push_back({{"component", c.component},
                         {"health", std::string(to_string(c.health))},
                         {"reason", c.reason}});
      if (c.action) reasons.back()["suggested_action"] = std::string(to_string(*c.action));
    }
    nlohmann::json blocked = nlohmann::json::array();
    for (const auto& b : g.blocked_by)
      blocked.push_back({{"component", b.component}, {"reason", b.reason}, {"owner", b.owner}});
    out.push_back({{"index", g.index},
                   {"uuid", g.uuid},
                   {"pci_bus_id", g.pci_bus_id},
                   {"health", std::string(to_string(g.health))},
                   {"reasons", std::move(reasons)},
                   {"blocked_by", std::move(blocked)},
                   {"values", g.values}});
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
