// GpuIssues: what the per-GPU NVIDIA components share to turn per-GPU findings (NVML errors, rule
// hits) into one state: worst health, joined reasons, the strongest repair action.
#pragma once

#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "components/nvidia/verdict.h"
#include "core/health.h"
#include "nvml/device.h"

namespace gpud::components {

class GpuIssues {
 public:
  // A per-GPU NVML error other than lost / reset (the preamble handles those): Unhealthy with the
  // error text.
  void nvml_error(const nvml::GpuSnapshot& gpu, std::string_view what, const std::string& error);
  // True when the field can be used; an errored field is recorded as an NVML error, a
  // NOT_SUPPORTED one is "not applicable" (false, no issue).
  template <typename T>
  bool usable(const nvml::GpuSnapshot& gpu, const nvml::Field<T>& field, std::string_view what) {
    if (field.status == nvml::FieldStatus::kError) nvml_error(gpu, what, field.error);
    return field.ok();
  }
  void add(Health health, std::string reason, std::optional<RepairAction> action = std::nullopt);

  bool empty() const { return reasons_.empty(); }
  Health health() const { return health_; }
  std::string reason() const;  // reasons joined with "; "
  std::string error() const;   // NVML error texts joined with "; "
  // HARDWARE_INSPECTION wins over REBOOT_SYSTEM; nullopt when no finding asked for an action.
  std::optional<SuggestedActions> actions(std::string description = "") const;

  // One state for `component`: the issues, or `healthy_reason` when there are none; extra_info
  // {"data": data}.
  CheckResult result(std::string_view component, std::string healthy_reason,
                     const nlohmann::json& data, std::string detail,
                     TimePoint now = Clock::now()) const;

 private:
  Health health_ = Health::kHealthy;
  std::vector<std::string> reasons_;
  std::vector<std::string> errors_;
  bool reboot_ = false;
  bool inspect_ = false;
  bool check_app_ = false;
};

// One state for `component` with extra_info {"data": data} and `detail` as the detail table; for
// components whose findings are not per-GPU issues.
inline CheckResult data_result(std::string_view component, Health health, std::string reason,
                               const nlohmann::json& data, std::string detail,
                               std::optional<SuggestedActions> actions = std::nullopt) {
  auto r = single_state(component, health, std::move(reason), std::move(actions),
                        {{"data", data.dump()}});
  r.detail = std::move(detail);
  return r;
}

}  // namespace gpud::components
