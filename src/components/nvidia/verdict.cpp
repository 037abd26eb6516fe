#include "components/nvidia/verdict.h"

#include <algorithm>

#include "components/nvidia/nvidia_component.h"
#include "core/strings.h"

namespace gpud::components {

nlohmann::json gpu_identity_json(const nvml::GpuSnapshot& gpu) {
  return {{"uuid", gpu.uuid.ok() ? gpu.uuid.value : ""},
          {"bus_id", gpu.pci_bus_id.ok() ? gpu.pci_bus_id.value : ""},
          {"index", gpu.index}};
}

std::string format_table(const std::vector<std::vector<std::string>>& rows) {
  std::vector<size_t> width;
  for (const auto& row : rows)
    for (size_t i = 0; i < row.size(); ++i) {
      if (width.size() <= i) width.push_back(0);
      width[i] = std::max(width[i], row[i].size());
    }
  std::string out;
  for (const auto& row : rows) {
    std::string line;
    for (size_t i = 0; i < row.size(); ++i) {
      line += row[i];
      if (i + 1 < row.size()) line += std::string(width[i] - row[i].size() + 2, ' ');
    }
    out += line + "\n";
  }
  return out;
}

VerdictFinding VerdictFinding::about(const nvml::GpuSnapshot& gpu, Health health,
                                     std::string reason, std::optional<RepairAction> action,
                                     bool nvml_error) {
  VerdictFinding f;
  f.gpu = gpu.index;
  f.health = health;
  f.reason = std::move(reason);
  f.action = action;
  f.nvml_error = nvml_error;
  f.uuid = gpu.uuid.ok() ? gpu.uuid.value : "";
  f.bus_id = gpu.pci_bus_id.ok() ? gpu.pci_bus_id.value : "";
  return f;
}

void NvidiaVerdict::add(const nvml::GpuSnapshot& gpu, Health health, std::string reason,
                        std::optional<RepairAction> action) {
  findings.push_back(VerdictFinding::about(gpu, health, std::move(reason), action));
}

void NvidiaVerdict::add(Health health, std::string reason, std::optional<RepairAction> action) {
  VerdictFinding f;
  f.health = health;
  f.reason = std::move(reason);
  f.action = action;
  findings.push_back(std::move(f));
}

void NvidiaVerdict::nvml_error(const nvml::GpuSnapshot& gpu, std::string_view what,
                               const std::string& error) {
  findings.push_back(VerdictFinding::about(gpu, Health::kUnhealthy,
                                           gpu_label(gpu) + ": " + std::string(what) + ": " + error,
                                           std::nullopt, /*nvml_error=*/true));
}

Health NvidiaVerdict::health() const {
  Health h = Health::kHealthy;
  for (const auto& f : findings) h = worst(h, f.health);
  return h;
}

std::optional<RepairAction> NvidiaVerdict::action() const {
  for (RepairAction a : {RepairAction::kHardwareInspection, RepairAction::kRebootSystem,
                         RepairAction::kCheckUserAppAndGpu})
    for (const auto& f : findings)
      if (f.action == a) return a;
  return std::nullopt;
}

std::vector<VerdictFinding> NvidiaVerdict::findings_for(unsigned int gpu) const {
  std::vector<VerdictFinding> out;
  for (const auto& f : findings)
    if (f.gpu == gpu) out.push_back(f);
  return out;
}

CheckResult render_verdict(std::string_view component, const NvidiaVerdict& v, TimePoint now) {
  std::vector<std::string> reasons, errors;
  for (const auto& f : v.findings) {
    reasons.push_back(f.reason);
    if (f.nvml_error) errors.push_back(f.reason);
  }
  std::optional<SuggestedActions> actions;
  if (auto a = v.action()) actions = SuggestedActions{v.action_description, {*a}};
  nlohmann::json data = v.data;
  std::string detail = v.detail_preface;
  if (!v.columns.empty()) {
    nlohmann::json gpus = nlohmann::json::array();
    std::vector<std::vector<std::string>> rows = {{"GPU"}};
    rows[0].insert(rows[0].end(), v.columns.begin(), v.columns.end());
    for (const auto& g : v.gpus) {
      if (g.in_data) gpus.push_back(g.data);
      if (!g.in_table) continue;
      auto& row = rows.emplace_back(std::vector<std::string>{std::to_string(g.index)});
      row.insert(row.end(), g.cells.begin(), g.cells.end());
    }
    data["gpus"] = std::move(gpus);
    detail += rows.size() == 1 && !v.empty_table.empty() ? v.empty_table : format_table(rows);
  }
  detail += v.detail_postscript;
  CheckResult r = single_state(
      component, v.health(),
      reasons.empty() ? v.healthy_reason : v.reason_prefix + join(reasons, "; ") + v.reason_suffix,
      std::move(actions), std::move(data), now);
  r.states[0].error = join(errors, "; ");
  r.detail = std::move(detail);
  // Each finding, typed: a GPU's with its identity (from its row when the finding has none).
  for (const auto& f : v.findings) {
    Finding typed = Finding::about(Subject::host(), f.health, f.reason, f.action);
    if (f.gpu) {
      std::string uuid = f.uuid, bus = f.bus_id;
      for (const auto& g : v.gpus)
        if (g.index == *f.gpu && g.data.is_object()) {
          if (uuid.empty()) uuid = g.data.value("uuid", "");
          if (bus.empty()) bus = g.data.value("bus_id", "");
        }
      typed.subject = Subject::gpu(*f.gpu, std::move(uuid), std::move(bus));
    }
    r.states[0].findings.push_back(std::move(typed));
  }
  return r;
}

}  // namespace gpud::components
