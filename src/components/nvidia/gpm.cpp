#include "components/nvidia/gpm.h"

#include "components/nvidia/nvidia_b_common.h"

namespace gpud::components {

CheckResult evaluate_gpm(const nvml::NvmlSnapshot& snapshot) {
  nlohmann::json gpus = nlohmann::json::array();
  std::vector<std::vector<std::string>> rows = {{"GPU", "UUID", "GPM"}};
  std::string errors;
  size_t supported = 0;
  for (const auto& g : snapshot.gpus) {
    const auto& f = g.gpm_supported;
    bool yes = f.ok() && f.value;
    gpus.push_back({{"uuid", g.uuid.value}, {"bus_id", g.pci_bus_id.value}, {"supported", yes}});
    rows.push_back(
        {std::to_string(g.index), g.uuid.value,
         yes ? "supported" : (f.status == nvml::FieldStatus::kError ? "error" : "not supported")});
    if (yes) ++supported;
    if (f.status == nvml::FieldStatus::kError)
      errors += (errors.empty() ? "" : "; ") + gpu_label(g) + ": " + f.error;
  }
  nlohmann::json data = {{"gpus", gpus}, {"metrics_sampled", false}};
  std::string detail = format_table(rows);
  if (!errors.empty()) return b_result(kGpmName, Health::kUnhealthy, errors, data, detail);
  std::string reason = supported == 0
                           ? "GPM not supported (not applicable)"
                           : "GPM supported on " + std::to_string(supported) + "/" +
                                 std::to_string(snapshot.gpus.size()) +
                                 " GPU(s); GPM metrics are not sampled yet (support reported only)";
  return b_result(kGpmName, Health::kHealthy, reason, data, detail);
}

}  // namespace gpud::components
