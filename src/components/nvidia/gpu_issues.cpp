#include "components/nvidia/gpu_issues.h"

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

}  // namespace gpud::components
