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

void NvidiaVerdict::add(const nvml::GpuSnapshot& gpu, Health health, std::string reason,
                        std::optional<RepairAction> action) {
  findings.push_back({gpu.index, health, std::move(reason), action, /*nvml_error=*/false});
}

void NvidiaVerdict::add(Health health, std::string reason, std::optional<RepairAction> action) {
  findings.push_back({std::nullopt, health, std::move(reason), action, /*nvml_error=*/false});
}

void NvidiaVerdict::nvml_error(const nvml::GpuSnapshot& gpu, std::string_view what,
                               const std::string& error) {
  findings.push_back({gpu.index, Health::kUnhealthy,
                      gpu_label(gpu) + ": " + std::string(what) + ": " + error, std::nullopt,
                      /*nvml_error=*/true});
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

std::vector<Finding> NvidiaVerdict::findings_for(unsigned int gpu) const {
  std::vector<Finding> out;
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
      std::move(actions), {{"data", data.dump()}}, now);
  r.states[0].error = join(errors, "; ");
  r.detail = std::move(detail);
  // Each GPU's own findings, for the per-GPU view (gpu_health).
  nlohmann::json per_gpu = nlohmann::json::array();
  for (const auto& f : v.findings)
    if (f.gpu && f.health != Health::kHealthy) {
      nlohmann::json finding = {
          {"gpu", *f.gpu}, {"health", std::string(to_string(f.health))}, {"reason", f.reason}};
      if (f.action) finding["suggested_action"] = std::string(to_string(*f.action));
      per_gpu.push_back(std::move(finding));
    }
  if (!per_gpu.empty()) r.states[0].extra_info["gpu_findings"] = per_gpu.dump();
  return r;
}

}  // namespace gpud::components
