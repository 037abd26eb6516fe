#include "components/nvidia/gpu_issues.h"

#include <algorithm>

#include "components/nvidia/nvidia_component.h"
#include "core/strings.h"

namespace gpud::components {

void GpuIssues::nvml_error(const nvml::GpuSnapshot& gpu, std::string_view what,
                           const std::string& error) {
  std::string text = gpu_label(gpu) + ": " + std::string(what) + ": " + error;
  errors_.push_back(text);
  add(Health::kUnhealthy, text);
}

void GpuIssues::add(Health health, std::string reason, std::optional<RepairAction> action) {
  health_ = worst(health_, health);
  reasons_.push_back(std::move(reason));
  if (!action) return;
  if (*action == RepairAction::kHardwareInspection) inspect_ = true;
  if (*action == RepairAction::kRebootSystem) reboot_ = true;
  if (*action == RepairAction::kCheckUserAppAndGpu) check_app_ = true;
}

std::string GpuIssues::reason() const { return join(reasons_, "; "); }
std::string GpuIssues::error() const { return join(errors_, "; "); }

std::optional<SuggestedActions> GpuIssues::actions(std::string description) const {
  if (inspect_)
    return SuggestedActions{std::move(description), {RepairAction::kHardwareInspection}};
  if (reboot_) return SuggestedActions{std::move(description), {RepairAction::kRebootSystem}};
  if (check_app_)
    return SuggestedActions{std::move(description), {RepairAction::kCheckUserAppAndGpu}};
  return std::nullopt;
}

CheckResult GpuIssues::result(std::string_view component, std::string healthy_reason,
                              const nlohmann::json& data, std::string detail, TimePoint now) const {
  CheckResult r = single_state(component, health_, empty() ? std::move(healthy_reason) : reason(),
                               actions(), {{"data", data.dump()}}, now);
  r.states[0].error = error();
  r.detail = std::move(detail);
  return r;
}

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

}  // namespace gpud::components
