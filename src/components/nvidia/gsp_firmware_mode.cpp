#include "components/nvidia/gsp_firmware_mode.h"

namespace gpud::components {

NvidiaVerdict evaluate_gsp_firmware_mode(const nvml::NvmlSnapshot& snapshot) {
  NvidiaVerdict v;
  v.columns = {"UUID", "GSP", "DEFAULT", "VERSION"};
  size_t supported = 0, enabled = 0;
  auto text = [](const nvml::Field<bool>& f) {
    return f.ok() ? (f.value ? "enabled" : "disabled")
                  : (f.supported() ? "error" : "not supported");
  };
  for (const auto& g : snapshot.gpus) {
    const auto& gsp = g.gsp;
    GpuRow& row =
        v.gpus.emplace_back(g.index, nlohmann::json{{"uuid", g.uuid.value},
                                                    {"bus_id", g.pci_bus_id.value},
                                                    {"supported", gsp.enabled.supported()}});
    if (gsp.enabled.ok()) row.data["enabled"] = gsp.enabled.value;
    if (gsp.default_enabled.ok()) row.data["default_enabled"] = gsp.default_enabled.value;
    if (gsp.version.ok()) row.data["version"] = gsp.version.value;
    row.cells = {g.uuid.value, text(gsp.enabled), text(gsp.default_enabled),
                 gsp.version.ok() ? gsp.version.value : "-"};
    if (gsp.enabled.supported()) ++supported;
    if (gsp.enabled.ok() && gsp.enabled.value) ++enabled;
    if (gsp.enabled.status == nvml::FieldStatus::kError)
      v.add(g, Health::kUnhealthy, gpu_label(g) + ": " + gsp.enabled.error);
    else if (gsp.version.status == nvml::FieldStatus::kError)
      v.add(g, Health::kUnhealthy, gpu_label(g) + ": " + gsp.version.error);
  }
  v.healthy_reason = supported == 0 ? "GSP firmware mode not supported (not applicable)"
                                    : "GSP firmware enabled on " + std::to_string(enabled) + "/" +
                                          std::to_string(snapshot.gpus.size()) + " GPU(s)";
  return v;
}

}  // namespace gpud::components
