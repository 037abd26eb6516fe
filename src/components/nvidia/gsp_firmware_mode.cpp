#include "components/nvidia/gsp_firmware_mode.h"

#include "components/nvidia/gpu_issues.h"

namespace gpud::components {

CheckResult evaluate_gsp_firmware_mode(const nvml::NvmlSnapshot& snapshot) {
  nlohmann::json gpus = nlohmann::json::array();
  std::vector<std::vector<std::string>> rows = {{"GPU", "UUID", "GSP", "DEFAULT", "VERSION"}};
  std::string errors;
  size_t supported = 0, enabled = 0;
  auto text = [](const nvml::Field<bool>& f) {
    return f.ok() ? (f.value ? "enabled" : "disabled")
                  : (f.supported() ? "error" : "not supported");
  };
  for (const auto& g : snapshot.gpus) {
    const auto& gsp = g.gsp;
    nlohmann::json j = {{"uuid", g.uuid.value},
                        {"bus_id", g.pci_bus_id.value},
                        {"supported", gsp.enabled.supported()}};
    if (gsp.enabled.ok()) j["enabled"] = gsp.enabled.value;
    if (gsp.default_enabled.ok()) j["default_enabled"] = gsp.default_enabled.value;
    if (gsp.version.ok()) j["version"] = gsp.version.value;
    gpus.push_back(j);
    rows.push_back({std::to_string(g.index), g.uuid.value, text(gsp.enabled),
                    text(gsp.default_enabled), gsp.version.ok() ? gsp.version.value : "-"});
    if (gsp.enabled.supported()) ++supported;
    if (gsp.enabled.ok() && gsp.enabled.value) ++enabled;
    if (gsp.enabled.status == nvml::FieldStatus::kError)
      errors += (errors.empty() ? "" : "; ") + gpu_label(g) + ": " + gsp.enabled.error;
    else if (gsp.version.status == nvml::FieldStatus::kError)
      errors += (errors.empty() ? "" : "; ") + gpu_label(g) + ": " + gsp.version.error;
  }
  nlohmann::json data = {{"gpus", gpus}};
  std::string detail = format_table(rows);
  if (!errors.empty())
    return data_result(kGspFirmwareModeName, Health::kUnhealthy, errors, data, detail);
  std::string reason = supported == 0 ? "GSP firmware mode not supported (not applicable)"
                                      : "GSP firmware enabled on " + std::to_string(enabled) + "/" +
                                            std::to_string(snapshot.gpus.size()) + " GPU(s)";
  return data_result(kGspFirmwareModeName, Health::kHealthy, reason, data, detail);
}

}  // namespace gpud::components
